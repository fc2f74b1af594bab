"""What the command line says (issue 96, low): a δ suggestion the guides agree with, no progress bar under
--quiet, warnings as the command's own lines."""
import json
import subprocess
import sys

import pytest

from swflow.tables.example import example_table


def test_delta_refusal_suggests_what_the_guides_use():
    from swflow.privacy import PrivacySpec, ReleasePlan, calibrate

    plan = ReleasePlan(releases=1, dataset_size=1000, sample_size=None, n_projections=3, dim=4,
                       noise="gaussian", size_private=False)
    with pytest.raises(ValueError, match=r"e\.g\. 1e-09, as the guides do"):
        calibrate(PrivacySpec(epsilon=1.0, delta=0.01, count_noise="gaussian"), plan)
    tiny = ReleasePlan(releases=1, dataset_size=10**10, sample_size=None, n_projections=3, dim=4, noise="gaussian",
                       size_private=False)
    with pytest.raises(ValueError, match=r"e\.g\. 1e-11"):  # below 1/n where n is past 10^9
        calibrate(PrivacySpec(epsilon=1.0, delta=1e-9, count_noise="gaussian"), tiny)


@pytest.fixture
def table_files(tmp_path):
    frame, schema = example_table(300, seed=3)
    frame.to_csv(tmp_path / "t.csv", index=False)
    (tmp_path / "s.json").write_text(json.dumps(schema.to_json()))
    return tmp_path


def test_quiet_draws_no_bar_and_warnings_read_as_the_commands(table_files):
    """--quiet: nothing on stderr but the command's warning, printed as `swflow: warning: ...` (the
    little-to-learn warning of 300 records at ε = 0.05), never as a UserWarning with its source line."""
    run = subprocess.run([sys.executable, "-c", "import sys; from swflow.cli import console; sys.exit(console())",
                          "generate", "--table", str(table_files / "t.csv"), "--schema", str(table_files / "s.json"),
                          "--epsilon", "0.05", "--steps", "30", "--quiet", "--out", str(table_files / "run")],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "swflow: warning: the released tables count about" in run.stderr
    assert "UserWarning" not in run.stderr and "warnings.warn" not in run.stderr
    assert "fitting" not in run.stderr and "it/s" not in run.stderr  # no progress bar


def test_a_big_file_shows_a_bar_each_time_it_is_read(tmp_path, monkeypatch, capsys):
    """Issue 96, 8: minutes of reading a big file show a bar (in bytes, to the file's size), where asked and only
    there; the records read are the same."""
    import swflow.tables.files as files
    from swflow.tables.codec import TableCodec

    frame, schema = example_table(3000, seed=1)
    frame.to_csv(tmp_path / "big.csv", index=False)
    monkeypatch.setattr(files, "READ_BAR_BYTES", 1)  # every file is big
    rows = files.TableRows(tmp_path / "big.csv", TableCodec(schema), chunk_rows=500)
    capsys.readouterr()
    with files.reading_shown():
        shown = sum(len(cells) for _, cells in rows.cell_chunks())
    err = capsys.readouterr().err
    assert shown == 3000 and "reading big.csv" in err
    size = (tmp_path / "big.csv").stat().st_size
    assert f"{size / 1000:.1f}k" in err.replace("kB", "k") or "100%" in err
    assert sum(len(cells) for _, cells in rows.cell_chunks()) == 3000
    assert "reading big.csv" not in capsys.readouterr().err  # outside the block: no bar

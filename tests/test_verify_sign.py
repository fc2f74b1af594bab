"""Issue 76, items 2 and 3: one verification everywhere (`swflow verify`, `evaluate`, `sample`) and signed runs.

A table run folder is made once by the command; each test edits a copy. The forgeries the outside review made to
pass `evaluate` (every σ × 10 with the claim restated; samples.csv replaced by the private rows) are refused by
every command; a signed run verifies with its owner's key, and any changed byte, added file or other key is
refused.
"""
from __future__ import annotations

import json
import shutil

import pytest
import torch

from swflow.cli import main
from swflow.tables.example import example_table


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """(a finished table run folder, its private rows' file, held-out rows' file, a key pair)."""
    root = tmp_path_factory.mktemp("made")
    frame, schema = example_table(1200, seed=3)
    frame.iloc[:1000].to_csv(root / "private.csv", index=False)
    frame.iloc[1000:].to_csv(root / "heldout.csv", index=False)
    (root / "schema.json").write_text(json.dumps(schema.to_json()))
    assert main(["generate", "--table", str(root / "private.csv"), "--schema", str(root / "schema.json"),
                 "--epsilon", "1", "--delta", "1e-7", "--steps", "30", "--out", str(root / "run"), "--quiet"]) == 0
    assert main(["sign", "--new-key", str(root / "owner.pem")]) == 0
    return root


def _copy(made, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(made / "run", run)
    return run


def _scaled_noise(run, factor=10.0):
    """Every σ × factor in model.pt and privacy.json, the claim restated by the library's own functions."""
    from swflow.privacy import PrivacyReport
    from swflow.privacy.accountants import epsilon_from_events
    from swflow.privacy.ledger import MechanismEvent
    from swflow.privacy.report import statement, unit_of

    blob = torch.load(run / "model.pt", weights_only=True)
    for event in blob["report"]["ledger"]:
        event["noise_std"] *= factor
        event["noise_multiplier"] *= factor
    report = PrivacyReport.from_json(blob["report"])
    epsilon = epsilon_from_events(tuple(MechanismEvent(**e) for e in report.ledger), delta=report.delta_accountant,
                                  adjacency=report.adjacency)
    main_event = report.ledger[0]
    blob["report"].update(epsilon=epsilon, target_epsilon=epsilon, noise_std=main_event["noise_std"],
                          noise_multiplier=main_event["noise_multiplier"],
                          statement=statement(epsilon, report.delta, report.accountant, report.adjacency,
                                              unit_of(report)))
    blob["privacy"]["epsilon"] = epsilon
    torch.save(blob, run / "model.pt")
    claimed = json.loads((run / "privacy.json").read_text())
    claimed.update({k: blob["report"][k] for k in ("epsilon", "target_epsilon", "noise_std", "noise_multiplier",
                                                    "statement", "ledger")})
    (run / "privacy.json").write_text(json.dumps(claimed))


def test_an_honest_run_verifies_and_says_what_it_checked(made, capsys):
    assert main(["verify", str(made / "run")]) == 0
    out = capsys.readouterr().out
    assert "equal byte for byte" in out and "derived again from its settings" in out
    assert "unsigned" in out and "no file can prove" in out


@pytest.mark.parametrize("command", ["verify", "evaluate", "sample"])
def test_ten_times_the_noise_restated_is_refused_by_every_command(made, tmp_path, capsys, command):
    run = _copy(made, tmp_path)
    _scaled_noise(run)
    argv = {"verify": ["verify", str(run)],
            "evaluate": ["evaluate", str(run), "--against", str(made / "heldout.csv"),
                         "--owner-out", str(tmp_path / "owner")],
            "sample": ["sample", str(run), "--n", "10", "--out", str(tmp_path / "more")]}[command]
    assert main(argv) == 2
    assert "edited" in capsys.readouterr().err
    assert not (tmp_path / "owner").exists() and not (tmp_path / "more").exists()


@pytest.mark.parametrize("command", ["verify", "evaluate"])
def test_samples_replaced_by_the_private_rows_are_refused(made, tmp_path, capsys, command):
    run = _copy(made, tmp_path)
    shutil.copy(made / "private.csv", run / "samples.csv")
    argv = (["verify", str(run)] if command == "verify" else
            ["evaluate", str(run), "--against", str(made / "heldout.csv"), "--owner-out", str(tmp_path / "owner")])
    assert main(argv) == 2
    assert "samples were replaced or edited" in capsys.readouterr().err


def test_samples_of_another_machine_are_said_unchecked(made, tmp_path, capsys):
    run = _copy(made, tmp_path)
    claimed = json.loads((run / "privacy.json").read_text())
    claimed["run_config"]["samples"]["torch"] = "0.0.1"
    (run / "privacy.json").write_text(json.dumps(claimed))
    assert main(["verify", str(run)]) == 0
    assert "made again byte for byte only there" in capsys.readouterr().out


def test_a_signed_run_verifies_with_its_owner_s_key(made, tmp_path, capsys):
    run = _copy(made, tmp_path)
    assert main(["sign", str(run), "--key", str(made / "owner.pem")]) == 0
    assert main(["verify", str(run), "--public-key", str(made / "owner.pem.pub")]) == 0
    assert "files signed by" in capsys.readouterr().out


@pytest.mark.parametrize("change", ["a byte of model.pt", "a byte of samples.csv", "a byte of privacy.json",
                                    "a file added", "a file removed", "another key", "the digest list edited"])
def test_any_change_to_a_signed_run_is_refused(made, tmp_path, capsys, change):
    run = _copy(made, tmp_path)
    assert main(["sign", str(run), "--key", str(made / "owner.pem")]) == 0
    public = made / "owner.pem.pub"
    if change.startswith("a byte of"):
        path = run / change.split()[-1]
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 1
        path.write_bytes(bytes(data))
    elif change == "a file added":
        (run / "notes.txt").write_text("added later\n")
    elif change == "a file removed":
        (run / "samples.csv").unlink()
    elif change == "another key":
        main(["sign", "--new-key", str(tmp_path / "other.pem")])
        public = tmp_path / "other.pem.pub"
    else:
        signed = json.loads((run / "signature.json").read_text())
        signed["files"]["samples.csv"] = "0" * 64
        (run / "signature.json").write_text(json.dumps(signed))
    capsys.readouterr()
    from swflow.io.signing import SignatureRefused, check_signature

    with pytest.raises((SignatureRefused, FileNotFoundError, ValueError)):
        check_signature(run, public)
    assert main(["verify", str(run), "--public-key", str(public), "--no-samples"]) == 2


def test_a_key_is_never_replaced_and_the_private_key_is_its_owner_s_only(made, capsys):
    assert main(["sign", "--new-key", str(made / "owner.pem")]) == 2
    assert "never replaced" in capsys.readouterr().err
    assert (made / "owner.pem").stat().st_mode & 0o077 == 0


def test_verify_checks_a_flow_run_s_recorded_releases(tmp_path, capsys):
    """A flow run (the last release's fixture, a histogram release: every step's σ is 0, the noise is on the
    counts): its claim and model.h5's releases verified; one step recorded with noise it never had is refused."""
    from pathlib import Path

    import h5py

    run = tmp_path / "run"
    shutil.copytree(Path(__file__).parent / "fixtures" / "release-6977961" / "run", run)
    assert main(["verify", str(run), "--quiet"]) == 0
    assert "model.h5: every recorded release's noise" in capsys.readouterr().out
    with h5py.File(run / "model.h5", "r+") as f:
        f["sigma"][0] = 1.0
    assert main(["verify", str(run), "--quiet"]) == 2

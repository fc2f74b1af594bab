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


# -- what an outside review forged (issue 96, items 2 and 10) -----------------------------------------------------------
def _signed_copy(made, tmp_path):
    run = _copy(made, tmp_path)
    assert main(["sign", str(run), "--key", str(made / "owner.pem")]) == 0
    return run


def _every_command_refuses(made, run, tmp_path, capsys, words: str):
    """verify --public-key, sample --public-key and evaluate --public-key each refuse ``run``, saying ``words``."""
    public = str(made / "owner.pem.pub")
    for argv in (["verify", str(run), "--public-key", public, "--no-samples", "--quiet"],
                 ["sample", str(run), "--n", "5", "--out", str(tmp_path / "more"), "--public-key", public, "--quiet"],
                 ["evaluate", str(run), "--against", str(made / "heldout.csv"), "--owner-out",
                  str(tmp_path / "owner"), "--public-key", public]):
        capsys.readouterr()
        assert main(argv) == 2, argv[0]
        assert words in capsys.readouterr().err, argv[0]
    assert not (tmp_path / "more").exists() and not (tmp_path / "owner").exists()


@pytest.mark.parametrize("link", ["privacy.json to a forgery", "a folder outside", "a broken link"])
def test_links_in_a_signed_run_are_refused_by_every_command(made, tmp_path, capsys, link):
    run = _signed_copy(made, tmp_path)
    if link == "privacy.json to a forgery":
        forged = tmp_path / "forged.json"
        forged.write_bytes((run / "privacy.json").read_bytes())
        (run / "privacy.json").unlink()
        (run / "privacy.json").symlink_to(forged)
    elif link == "a folder outside":
        (tmp_path / "outside").mkdir()
        (run / "extra").symlink_to(tmp_path / "outside", target_is_directory=True)
    else:
        (run / "ghost.csv").symlink_to(tmp_path / "nowhere.csv")
    _every_command_refuses(made, run, tmp_path, capsys, "is a link")


@pytest.mark.parametrize("field", ["public_key edited", "a field added", "format changed", "nested signature"])
def test_every_field_of_the_signature_is_checked(made, tmp_path, capsys, field):
    run = _signed_copy(made, tmp_path)
    signed = json.loads((run / "signature.json").read_text())
    words = "is not a signature swflow writes"
    if field == "public_key edited":
        main(["sign", "--new-key", str(tmp_path / "other.pem")])
        signed["public_key"] = (tmp_path / "other.pem.pub").read_text()
        words = "names another public key"
    elif field == "a field added":
        signed["comment"] = "trust me"
    elif field == "format changed":
        signed["format"] = "swflow-signature-0"
    else:
        (run / "more").mkdir()
        (run / "more" / "signature.json").write_text("{}")
        words = "below the top"
    if field != "nested signature":
        (run / "signature.json").write_text(json.dumps(signed))
    _every_command_refuses(made, run, tmp_path, capsys, words)


def test_verification_parses_the_bytes_it_read_and_hashed(made, tmp_path, monkeypatch, capsys):
    """privacy.json replaced by a forgery right after the folder was read (the race the review won 3 of 3 times):
    the signature holds over what was read, and what was read is what is parsed, so the genuine claim is reported
    and nothing of the forgery."""
    import swflow.io.signing as signing
    from swflow.pipeline.verify_run import verify_run

    run = _signed_copy(made, tmp_path)
    genuine = json.loads((run / "privacy.json").read_text())
    read = signing.read_run_files

    def read_then_swap(*args, **kwargs):
        files = read(*args, **kwargs)
        forged = dict(genuine, epsilon=0.231, statement="(0.231, 1e-07)-DP forged")
        (run / "privacy.json").write_text(json.dumps(forged))
        return files

    monkeypatch.setattr(signing, "read_run_files", read_then_swap)
    verified = verify_run(run, public_key=made / "owner.pem.pub", regenerate=False)
    assert verified.report.epsilon == genuine["epsilon"] != 0.231
    assert verified.checks[0].startswith("signature:")


def test_a_plain_copy_of_a_signed_run_verifies(made, tmp_path, capsys):
    """`cp RUN/* COPY/` leaves the hidden marker behind: it is not signed, so the copy verifies."""
    run = _signed_copy(made, tmp_path)
    assert (run / ".swflow-run").exists()
    copy = tmp_path / "copy"
    copy.mkdir()
    for path in run.iterdir():
        if not path.name.startswith("."):  # as a shell's * does
            shutil.copy(path, copy / path.name)
    assert main(["verify", str(copy), "--public-key", str(made / "owner.pem.pub"), "--quiet"]) == 0


def test_an_unsigned_read_back_says_what_it_cannot_prove_each_time(made, tmp_path, capsys):
    run = _copy(made, tmp_path)
    assert main(["sample", str(run), "--n", "5", "--out", str(tmp_path / "more"), "--quiet"]) == 0
    assert "note: unsigned" in capsys.readouterr().err
    assert main(["evaluate", str(run), "--against", str(made / "heldout.csv"), "--owner-out",
                 str(tmp_path / "owner")]) == 0
    assert "note: unsigned" in capsys.readouterr().err


# -- samples without a refit (issue 96, item 3) ------------------------------------------------------------------------
def _sample(run, out, *extra):
    return main(["sample", str(run), "--n", "50", "--seed", "4", "--out", str(out), "--quiet", *extra])


def test_sample_reads_the_stored_particles_once_verify_has_checked_them(made, tmp_path, monkeypatch, capsys):
    """Before verify: refitted (and said); after this machine's verify: read from model.pt, the same records."""
    monkeypatch.setenv("SWFLOW_CACHE", str(tmp_path / "cache"))
    run = _copy(made, tmp_path)
    assert _sample(run, tmp_path / "refit") == 0
    assert "fitted again" in capsys.readouterr().err
    assert main(["verify", str(run), "--quiet"]) == 0
    assert "equal bit for bit to those model.pt stores" in capsys.readouterr().out
    assert _sample(run, tmp_path / "stored") == 0
    assert "fitted again" not in capsys.readouterr().err
    assert (tmp_path / "stored" / "samples.csv").read_bytes() == (tmp_path / "refit" / "samples.csv").read_bytes()


def test_sample_reads_a_signed_runs_particles_with_its_owners_key(made, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SWFLOW_CACHE", str(tmp_path / "cache"))
    run = _signed_copy(made, tmp_path)
    assert _sample(run, tmp_path / "more", "--public-key", str(made / "owner.pem.pub")) == 0
    assert "fitted again" not in capsys.readouterr().err


def test_forged_particles_are_never_sampled(made, tmp_path, monkeypatch, capsys):
    """model.pt's particles replaced by one record repeated (what a forger would put there: a private row): no
    verify or signature vouches for the edited file, so verify and sample each fit the particles again and refuse
    the file whose stored ones differ."""
    monkeypatch.setenv("SWFLOW_CACHE", str(tmp_path / "cache"))
    run = _copy(made, tmp_path)
    assert main(["verify", str(run), "--quiet"]) == 0  # the genuine model.pt is remembered, not a forged one
    blob = torch.load(run / "model.pt", weights_only=True)
    blob["particles"] = [torch.nn.functional.one_hot(torch.zeros(len(p), dtype=torch.long), p.shape[1]).float()
                         for p in blob["particles"]]
    torch.save(blob, run / "model.pt")
    capsys.readouterr()
    assert main(["verify", str(run), "--quiet", "--no-samples"]) == 2
    assert "stores particles its release does not give" in capsys.readouterr().err
    assert _sample(run, tmp_path / "more") == 2
    assert "stores particles its release does not give" in capsys.readouterr().err
    assert not (tmp_path / "more").exists()

"""One verification of a finished run folder: what `swflow verify`, `evaluate` and `sample` all run first.

A table run (privacy.json, model.pt, samples.csv or .parquet):

1. privacy.json: ε, δ, the accountant, the statement and every derived field re-derived from its ledger;
2. model.pt: loaded as ``Synthesizer.load`` loads it: its ledger derived again from its settings event for event
   (swflow/pipeline/table_measurements.py), its released counts tested against the claimed noise;
3. privacy.json is model.pt's report (the same releases, the same claim);
4. the samples regenerated from model.pt with the run's recorded number and seed, compared byte for byte (where
   this machine's torch and swflow are the run's; otherwise said not to be checked);
5. the owner's signature, where a public key is given (swflow/io/signing.py).

An image run: 1, and its model.h5's recorded releases against the report (swflow.privacy.verify.verify_releases).
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Verified", "verify_run", "NOT_PROVABLE", "UNSIGNED"]

#: what no file of a run can prove, whatever its checks
NOT_PROVABLE = ("that the noise was drawn at random (counts plus chosen 'noise' of the right spread pass); that the "
                "private rows were the ones claimed, bounded as claimed; that the owner ran it")
#: what an unsigned run proves
UNSIGNED = ("unsigned: the checks show the files are consistent with one honest run of their settings, not that "
            "these settings were the owner's: a forger who edits every setting and count consistently makes a run "
            "anyone could have made. Ask the owner for a signed run and their public key")


@dataclass
class Verified:
    """A run folder that passed: its report, the checks made (what each tested) and what was not checked."""

    report: object
    checks: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    synthesizer: object = None


#: the files of a run that verification parses: copied as they are read and hashed, then parsed from the copy
PARSED = frozenset({"privacy.json", "model.pt", "model.h5", "samples.csv", "samples.parquet", "decoder.pt"})


def verify_run(run_dir: str | Path, *, public_key: str | Path | None = None, regenerate: bool = True,
               progress: bool | str = False, refit: bool = True) -> Verified:
    """Run every check on ``run_dir`` (module docstring); the first that fails raises (ClaimMismatch,
    SignatureRefused, or a ValueError that names the file). ``regenerate``: make the samples again and compare.

    Every file is read once (swflow.io.signing.read_run_files): hashed, and the ones parsed copied as they are read
    into a private folder; with ``public_key`` the signature is checked first, over those digests, and everything
    after reads the copy, so no file swapped in the folder meanwhile is parsed. Links, special files and nested
    signature files are refused.

    A table run's particles are fitted again from its release and compared with those model.pt stores; a run that
    passes every check is remembered by its model.pt's digest (swflow.io.verified). ``refit=False`` (what `sample`
    asks) reads the stored particles instead where the owner's signature or that memory vouches for model.pt, and
    refits elsewhere."""
    from ..io.signing import SIGNATURE, check_signed, read_run_files

    run_dir = Path(run_dir)
    with tempfile.TemporaryDirectory(prefix="swflow-verify-") as tmp:
        copy = Path(tmp) / "run"
        copy.mkdir()
        files = read_run_files(run_dir, copy_to=copy, parsed=PARSED)
        signature = None
        if public_key is not None:
            signed = check_signed(files, public_key, source=run_dir)
            signature = f"signature: {len(signed)} files signed by {public_key}'s key, none changed, none added"
        digest = files.digests.get("model.pt")
        vouched = None if refit else _vouched(digest, signed=signature is not None)
        try:
            verified = _verify_copy(copy, regenerate=regenerate, progress=progress, vouched=vouched, digest=digest)
        except (ValueError, FileNotFoundError) as err:
            raise _named(err, copy, run_dir) from None
    if signature is not None:
        verified.checks.insert(0, signature)
    else:
        verified.unchecked.append(f"{SIGNATURE} is present but was not checked: give the owner's public key"
                                  if files.signature is not None else UNSIGNED)
    return verified


def _vouched(digest: str | None, *, signed: bool) -> str | None:
    """Why model.pt's stored particles may be read (its owner's signature, or this machine's full verify), or None."""
    from ..io.verified import recall_verified

    if digest is None:
        return None
    if signed:
        return "model.pt is signed by the owner's key"
    recalled = recall_verified(digest)
    return None if recalled is None else f"`swflow verify` checked this model.pt in full here ({recalled.get('when')})"


def _verify_copy(copy: Path, *, regenerate: bool, progress, vouched: str | None, digest: str | None) -> Verified:
    from ..privacy.verify import read_verified_report

    verified = Verified(read_verified_report(copy))
    verified.checks.append("privacy.json: epsilon, delta, the accountant, the statement and every derived field "
                           "re-derived from its own ledger")
    if _is_table_run(copy):
        _verify_table(copy, verified, regenerate=regenerate, progress=progress, vouched=vouched)
        if vouched is None and regenerate and not verified.unchecked:
            _remember(digest, verified)
    else:
        _verify_flow(copy, verified)
    return verified


def _named(err: Exception, copy: Path, run_dir: Path) -> Exception:
    """``err`` with the private copy's path written as the run folder's, of the same type where it can be."""
    words = str(err).replace(str(copy), str(run_dir))
    try:
        return type(err)(words)
    except TypeError:
        return ValueError(words)


def _is_table_run(run_dir: Path) -> bool:
    from .tables import MODEL

    return (run_dir / MODEL).exists()


def _remember(digest: str | None, verified: Verified) -> None:
    import datetime

    from ..io.verified import remember_verified

    if digest is not None:
        remember_verified(digest, {"when": datetime.date.today().isoformat(), "checks": verified.checks})


def _verify_table(run_dir: Path, verified: Verified, *, regenerate: bool, progress, vouched: str | None) -> None:
    from ..privacy.verify import ClaimMismatch
    from .table_measurements import without_names
    from .tables import MODEL, TableSynthesizer

    syn = TableSynthesizer.load(run_dir / MODEL, progress=progress, stored=vouched is not None)
    verified.synthesizer = syn
    _check_particles(syn, verified, vouched, run_dir)
    model = syn.privacy_report().to_json()
    verified.checks.append(f"{MODEL}: its ledger derived again from its settings event for event; its released "
                           f"counts tested against the claimed noise ({model.get('noise_check', 'no noise')})")
    claimed = verified.report.to_json()
    record = claimed["run_config"].pop("samples", None)
    # what a read-back can test is said again by every load (a unit run's changed when its test did): not a claim
    claimed.pop("noise_check", None)
    model = {k: v for k, v in model.items() if k != "noise_check"}
    if "measurements" not in claimed:  # a run of an earlier swflow: its releases not yet named in privacy.json
        model.pop("measurements", None)
        model["ledger"] = without_names(model["ledger"])
    if claimed != model:
        differ = sorted(k for k in set(claimed) | set(model) if claimed.get(k) != model.get(k))
        raise ClaimMismatch(f"{run_dir}: privacy.json and {MODEL} describe different runs ({', '.join(differ)}): "
                            "one of them was edited or replaced; regenerate the run")
    verified.checks.append(f"privacy.json is {MODEL}'s own report")
    if not regenerate:
        return
    if record is None:
        verified.unchecked.append("the samples: privacy.json records no number and seed to make them again (a run "
                                  "of an earlier swflow)")
        return
    _compare_samples(run_dir, syn, record, verified)


def _check_particles(syn, verified: Verified, vouched: str | None, run_dir: Path) -> None:
    """The particles: read from model.pt where ``vouched``; else refitted, and the stored ones (a run of an earlier
    swflow has none) compared with them bit for bit where this machine's torch and swflow are the run's."""
    from ..privacy.verify import ClaimMismatch
    from .table_particles import same_particles

    if vouched is not None:
        verified.checks.append(f"particles: read from model.pt, not refitted: {vouched}")
        return
    if syn._stored is None:
        verified.unchecked.append("particles: model.pt stores none (a run of an earlier swflow): refitted each time")
        return
    elsewhere = _made_elsewhere(verified.report.run_config.get("samples") or {})
    if elsewhere:
        verified.unchecked.append(f"particles: {elsewhere}; refitted here, compared with the stored ones only there")
        return
    if not same_particles(syn._stored, syn._particles):
        raise ClaimMismatch(f"{run_dir}/model.pt stores particles its release does not give: the file was edited; "
                            "regenerate the run")
    verified.checks.append("particles: fitted again from the release, equal bit for bit to those model.pt stores")


def _compare_samples(run_dir: Path, syn, record: dict, verified: Verified) -> None:
    from ..privacy.verify import ClaimMismatch
    from .table_samples import write_samples

    path = run_dir / str(record["file"])
    if path.name not in ("samples.csv", "samples.parquet") or not path.is_file():
        raise ClaimMismatch(f"{run_dir}: privacy.json records the samples as {record['file']!r}, which the folder "
                            "does not hold: regenerate the run")
    elsewhere = _made_elsewhere(record)
    if elsewhere:
        verified.unchecked.append(f"{path.name}: {elsewhere}; the samples are made again byte for byte only there")
        return
    with tempfile.TemporaryDirectory() as tmp:
        again = Path(tmp) / path.name
        write_samples(syn, again, int(record["n"]), seed=int(record["seed"]))
        same = again.read_bytes() == path.read_bytes()
    if not same:
        raise ClaimMismatch(f"{path} is not what {run_dir}'s model gives ({record['n']} records, seed "
                            f"{record['seed']}): the samples were replaced or edited; regenerate them with "
                            f"`swflow sample {run_dir} --n {record['n']} --seed {record['seed']} --out NEW`")
    verified.checks.append(f"{path.name}: made again from the model ({record['n']} records, seed {record['seed']}), "
                           "equal byte for byte")


def _made_elsewhere(record: dict) -> str | None:
    """Where ``record`` (privacy.json's samples record) names another swflow, torch or machine than this one: in
    words; else None (only there do a refit and a resample come out bit for bit the same)."""
    from .run_samples import made_here

    here = made_here()
    return None if all(record.get(k) == v for k, v in here.items()) else \
        f"made with {_made(record)}, this machine has {_made(here)}"


def _made(record: dict) -> str:
    return f"swflow {record.get('swflow')}, torch {record.get('torch')} on {record.get('machine')}"


def _verify_flow(run_dir: Path, verified: Verified) -> None:
    from ..methods.model import FlowModel

    if (run_dir / "model.h5").exists():
        FlowModel.from_file(run_dir / "model.h5", report=verified.report)  # checks its releases against the report
        verified.checks.append("model.h5: every recorded release's noise against the report's calibrated mechanism")
    verified.unchecked.append("the samples of a flow run are its own particles: not made again")

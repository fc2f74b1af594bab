"""The commands the page runs, written once: each step is a `swflow` command line (which the page runs as it is,
in a process of its own) and the Python that does the same, both shown beside the step so that the owner can
rerun it without the page. The page has no other way to do any step.
"""
from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass

__all__ = ["Step", "schema_step", "preview_step", "release_step", "report_step", "verify_step", "sign_steps"]


@dataclass(frozen=True)
class Step:
    """One step: the argv after `swflow`, and its Python equivalent."""

    args: tuple[str, ...]
    python: str

    @property
    def command(self) -> str:
        """The command line, as an owner types it."""
        return shlex.join(("swflow", *self.args))

    def argv(self) -> list[str]:
        """The process the page starts: this Python's swflow, the same command."""
        return [sys.executable, "-m", "swflow.cli", *self.args]


def schema_step(workspace) -> Step:
    public = workspace.files["public"]
    return Step(("schema", str(public), "--out", str(workspace.schema_path), "--overwrite"),
                "from swflow.tables import Schema\nfrom swflow.tables.files import read_table\n\n"
                f"Schema.propose(read_table({str(public)!r})).write({str(workspace.schema_path)!r})")


def preview_step(workspace, epsilons=(1.0, 3.0, 10.0)) -> Step:
    s, public = workspace.settings, workspace.files["public"]
    target = ("--target", s.target) if s.target else ()
    return Step(("preview", str(public), "--schema", str(workspace.schema_path), "--epsilon",
                 *[f"{e:g}" for e in epsilons], "--delta", f"{s.delta:g}", *target, "--json"),
                "from swflow.pipeline.table_preview import preview_quality\nfrom swflow.tables import Schema\n"
                "from swflow.tables.files import read_table\n\n"
                f"schema = Schema.read({str(workspace.schema_path)!r})\n"
                f"lines = preview_quality(read_table({str(public)!r}, schema=schema), schema, "
                f"epsilons={list(epsilons)!r}, delta={s.delta!r}, target={s.target!r})")


def release_step(workspace) -> Step:
    s, files = workspace.settings, workspace.files
    out = workspace.run_dir()
    unit = ("--privacy-unit", s.privacy_unit) if s.privacy_unit else ()
    rows = ("--max-rows-per-unit", str(s.max_rows_per_unit)) if s.max_rows_per_unit else ()
    public = ("--public-table", str(files["public"])) if "public" in files else ()
    target = ("--target", s.target) if s.target else ()
    adjacency = ("--adjacency", s.adjacency) if s.adjacency != "replace-one" and not s.privacy_unit else ()
    args = ("generate", "--table", str(files["private"]), "--schema", str(workspace.schema_path), "--epsilon",
            f"{s.epsilon:g}", "--delta", f"{s.delta:g}", *adjacency, *unit, *rows, *public, *target, "--out", str(out))
    keywords = [f"epsilon={s.epsilon!r}", f"delta={s.delta!r}"]
    keywords += [f"adjacency={s.adjacency!r}"] if adjacency else []
    keywords += [f"privacy_unit={s.privacy_unit!r}"] if s.privacy_unit else []
    keywords += [f"max_rows_per_unit={s.max_rows_per_unit!r}"] if s.max_rows_per_unit else []
    keywords += [f"public={str(files['public'])!r}"] if "public" in files else []
    keywords += [f"target={s.target!r}"] if s.target else []
    python = ("from swflow import Synthesizer\nfrom swflow.tables import Schema\n\n"
              f"syn = Synthesizer(\"dpswflow-hist\", schema=Schema.read({str(workspace.schema_path)!r}),\n"
              f"                  {', '.join(keywords)})\n"
              f"syn.fit({str(files['private'])!r})       # spends the budget once\n"
              "print(syn.privacy_report().statement)\n"
              f"syn.save({str(out / 'model.pt')!r})   # the command line also writes privacy.json and the samples")
    return Step(args, python)


def report_step(workspace, run: str) -> Step:
    target = workspace.settings.target
    heldout, run_dir = workspace.files["heldout"], workspace.run_dir(run)
    extra = ("--target", target) if target else ()
    return Step(("evaluate", str(run_dir), "--against", str(heldout), *extra),
                "from swflow.tables.report import owner_report\n\n"
                f"metrics = owner_report({str(run_dir)!r}, {str(heldout)!r}, target={target!r})  # OWNER ONLY")


def verify_step(workspace, run: str) -> Step:
    run_dir = workspace.run_dir(run)
    key = workspace.key_path.with_name(workspace.key_path.name + ".pub")
    signed = ("--public-key", str(key)) if (run_dir / "signature.json").is_file() and key.is_file() else ()
    return Step(("verify", str(run_dir), *signed, "--quiet"),
                "from swflow.pipeline.verify_run import verify_run\n\n"
                f"verified = verify_run({str(run_dir)!r}"
                + (f", public_key={str(key)!r}" if signed else "") + ")\nprint(verified.checks)")


def sign_steps(workspace, run: str) -> list[Step]:
    """Make the owner's key pair where there is none yet, then sign the run."""
    key, run_dir = workspace.key_path, workspace.run_dir(run)
    steps = []
    if not key.is_file():
        steps.append(Step(("sign", "--new-key", str(key)),
                          f"from swflow.io.signing import new_key\n\nnew_key({str(key)!r})"))
    steps.append(Step(("sign", str(run_dir), "--key", str(key)),
                      f"from swflow.io.signing import sign_run\n\nsign_run({str(run_dir)!r}, {str(key)!r})"))
    return steps

"""The ``swflow`` command.

    swflow demo [--out DIR]                  embedded digits end to end (DPSWflow-r, eps = 10)
    swflow train-ae (--dataset NAME | --images PUBLIC) [...]   autoencoder on public images only
    swflow train-decoder --base NAME [...]     sharper decoder for its encoder (conditional GAN, public split)
    swflow generate (--dataset NAME | --images PRIVATE | --data FILE) --method M --epsilon E --out DIR [...]
    swflow privacy --method M (--epsilon E | --noise-multiplier Z) [shape options] [--json]
    swflow sample RUN_DIR --n N --out DIR      new particles from a finished run (no privacy cost)
    swflow evaluate RUN_DIR [--reference REF] FID, latent SW, precision/recall, accuracy -> metrics.json
    swflow compare RUN_DIR...                 one table of evaluated runs
    swflow animate RUN_DIR [--format mp4]     particles along the flow (GIF/MP4)
    swflow verify RUN_DIR [--public-key PUB]  every check of a finished run, and what it cannot prove
    swflow sign RUN_DIR --key KEY             the data owner's signature over every file of a run
    swflow schema PUBLIC --out SCHEMA.json    a table's schema proposed from public rows
    swflow preview PUBLIC --schema SCHEMA     the quality to expect at a few eps, from public rows only
    swflow app [FOLDER]                       the data owner's page, in the browser (127.0.0.1, a token)

Every private output directory holds privacy.json with "(eps, delta) under ACCOUNTANT, ADJACENCY".
One module per command group; errors are mapped to `swflow COMMAND: error: ...` here, in one place.
"""
from __future__ import annotations

import argparse
import os
import sys

from . import app, autoencoder, generate, privacy, runs, tables, verify
from ..core.errors import RunFailed

__all__ = ["main", "console", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    ap = argparse.ArgumentParser(prog="swflow", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", action="version", version=f"swflow {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)
    for module in (autoencoder, generate, runs, privacy, tables, verify, app):  # demo, train-ae, generate, sample, ...
        module.register(sub)
    return ap


BUDGET_KEYS = ("epsilon", "noise_multiplier")


def with_config(argv: list[str], args: argparse.Namespace) -> list[str]:
    """``argv`` with the values of ``args.config`` (a TOML file, swflow.pipeline.settings.read_config) inserted as
    flags right after the command, so the parser checks them as it checks typed ones and a flag typed on
    the command line, coming later, wins. A typed budget (either kind) replaces the file's."""
    from ..pipeline.settings import read_config

    tables = read_config(args.config)
    typed_budget = any(getattr(args, key, None) is not None for key in BUDGET_KEYS)
    flags = []
    for table, values in tables.items():
        for key, value in values.items():
            if key not in vars(args):
                raise ValueError(f"{args.config}: [{table}] {key}: `swflow {args.command}` has no --"
                                 f"{key.replace('_', '-')}")
            if key in BUDGET_KEYS and typed_budget:
                continue
            flag = "--" + key.replace("_", "-")
            if isinstance(value, bool):
                if value:
                    flags.append(flag)
                elif vars(args)[key] is None:  # a flag that is on, off or neither: false turns it off
                    flags.append("--no-" + flag[2:])
            else:
                flags += [flag, str(value)]
    at = argv.index(args.command) + 1
    return [*argv[:at], *flags, *argv[at:]]


#: what Ctrl-C leaves behind, per command: how to go on
RESUME_HINTS = {
    "generate": "rerun the same command with --resume to continue from the last checkpoint (nothing is spent twice)",
    "demo": "rerun it with --resume to continue from the last checkpoint",
    "train-ae": "rerun the same command to continue from the last saved epoch (NAME.partial.pt)",
    "train-decoder": "rerun the same command to continue from the last save (NAME.partial.pt)",
}


def console() -> int:
    """The `swflow` command's entry point (pyproject's console script). The command owns its process, so it
    chooses how OpenMP threads wait: idle threads sleep instead of spinning, which on a shared machine is the
    difference between a fair share of the cores and a several-fold slowdown (experiments/bench_step.py). Set
    before torch loads; a value the user exported wins. The commands also run small flows' steps on one thread
    (:mod:`swflow.simulate.threads`). The library (import swflow) never does either: it changes no
    process-wide state."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import warnings

    warnings.showwarning = _show_warning  # a warning reads as the command's own line, not a source line
    return main()


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as the command prints it: ``swflow: warning: MESSAGE`` (no class, file or source line)."""
    print(f"swflow: warning: {message}", file=file or sys.stderr)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if getattr(args, "config", None):
            args = parser.parse_args(with_config(argv, args))
        if hasattr(args, "method") and args.method is None:  # a table's method is the one that takes tables
            args.method = "dpswflow-hist" if getattr(args, "table", None) else "dpswflow-r"
        return args.func(args)
    except RunFailed as err:
        print(f"swflow {args.command}: error: {err}", file=sys.stderr)
        return 1
    except (ValueError, OSError) as err:  # errors a user can act on (bad input, files): no traceback
        print(f"swflow {args.command}: error: {err}{_os_hint(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        hint = RESUME_HINTS.get(args.command, "nothing was written; rerun the command")
        if getattr(args, "table", None) is not None:  # a table run keeps no checkpoint: its folder was only staged
            hint = ("a table run has no checkpoint: nothing was written to --out and nothing was published, so "
                    "rerun the same command (add --overwrite where --out held a finished run)")
        print(f"\nswflow {args.command}: interrupted: {hint}", file=sys.stderr)
        return 130


#: what to do about an error of the operating system, by its errno
_OS_HINTS = {"EACCES": "check that path's permissions, or write somewhere else (--out)",
             "EPERM": "check that path's permissions, or write somewhere else (--out)",
             "EROFS": "that file system is read-only: write somewhere else (--out)",
             "ENOSPC": "the disk is full: free some space, or write somewhere else (--out); nothing was published",
             "EDQUOT": "your disk quota is used up: free some space, or write somewhere else (--out)",
             "ENOENT": "no such file or folder: check the path", "EISDIR": "a folder is where a file belongs"}


def _os_hint(err: Exception) -> str:
    """' (what to do)' for an OSError the operating system raised, '' otherwise."""
    import errno

    name = errno.errorcode.get(getattr(err, "errno", None) or -1) if isinstance(err, OSError) else None
    hint = _OS_HINTS.get(name)
    return f" ({hint})" if hint and hint not in str(err) else ""


if __name__ == "__main__":
    sys.exit(console())

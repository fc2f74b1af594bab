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

Every private output directory holds privacy.json with "(eps, delta) under ACCOUNTANT, ADJACENCY".
One module per command group; errors are mapped to `swflow COMMAND: error: ...` here, in one place.
"""
from __future__ import annotations

import argparse
import sys

from . import autoencoder, generate, privacy, runs
from ._common import RunFailed

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="swflow", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    for module in (autoencoder, generate, runs, privacy):  # demo, train-ae, encode, generate, sample, ...
        module.register(sub)
    return ap


CONFIG_TABLES = ("run", "privacy", "shape", "flow")


BUDGET_KEYS = ("epsilon", "noise_multiplier")


def _config_defaults(parser: argparse.ArgumentParser, path: str) -> dict:
    """TOML tables [run] [privacy] [shape] [flow] -> argparse defaults (explicit flags still win)."""
    import tomllib

    try:
        with open(path, "rb") as f:
            table = tomllib.load(f)
    except FileNotFoundError:
        raise ValueError(f"config file {path} not found (see experiments/configs/)")
    from ..flow import FlowConfig
    from ..options import option_fields
    from ..privacy import PrivacySpec
    from ..registry import RunShape

    actions = {a.dest: a for a in parser._actions}
    known = set(actions)
    # a table per configuration dataclass, field for field ([run] holds the rest: dataset, method, ...)
    home = {f.name: table for table, cls in (("flow", FlowConfig), ("shape", RunShape), ("privacy", PrivacySpec))
            for f in option_fields(cls)}
    home.update(epsilon="privacy", noise_multiplier="privacy")
    from ..registry import METHODS

    home.update({f.name: "shape" for spec in METHODS.values() if spec.options is not None  # a method's own options
                 for f in option_fields(spec.option_class())})
    defaults = {}
    for section, values in table.items():
        if section not in CONFIG_TABLES or not isinstance(values, dict):
            raise ValueError(f"{path}: unknown table [{section}]; use {', '.join(CONFIG_TABLES)}")
        for key, value in values.items():
            if key not in known:
                raise ValueError(f"{path}: unknown key {key!r} in [{section}]")
            if home.get(key, "run") != section:
                raise ValueError(f"{path}: key {key!r} in [{section}]: it belongs in [{home.get(key, 'run')}]")
            expected = _toml_type(actions[key])
            if expected is not None and (not isinstance(value, expected) or
                                         (isinstance(value, bool) and expected is not bool)):
                names = {int: "an integer", str: "a string", bool: "true or false"}
                raise ValueError(f"{path}: [{section}] {key} = {value!r}: expected "
                                 f"{names.get(expected, 'a number')}")
            if expected == (int, float):
                value = float(value)
            defaults[key] = value
    return defaults


def _toml_type(action: argparse.Action):
    """The TOML value type an option takes: its argparse type, bool for flags (None: not checked)."""
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        return bool
    if action.type is float:
        return (int, float)
    return action.type if action.type in (int, str) else None


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if getattr(args, "config", None):
            sub = parser._subparsers._group_actions[0].choices[args.command]
            defaults = _config_defaults(sub, args.config)
            if any(getattr(args, key, None) is not None for key in BUDGET_KEYS):
                # A budget given on the command line replaces the config's (either kind), rather than
                # clashing with it: --noise-multiplier beside a config's epsilon means "this noise".
                for key in BUDGET_KEYS:
                    defaults.pop(key, None)
            sub.set_defaults(**defaults)
            args = parser.parse_args(argv)
        return args.func(args)
    except RunFailed as err:
        print(f"swflow {args.command}: error: {err}", file=sys.stderr)
        return 1
    except (ValueError, OSError) as err:  # errors a user can act on (bad input, files): no traceback
        print(f"swflow {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

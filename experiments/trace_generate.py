"""Follow `swflow generate`'s parsed flags to the first flow step: the places (modules) a run passes through.

A *stop* is a change of folder on the call stack (swflow's folders, and autoencoders/): a call into another
folder, or a return to one. The trace starts when the command's function is called with the parsed flags and
ends at the first simulator step. It prints the stops, the places (distinct modules), the climbs (a call from a
lower layer into a higher one, by swflow.core.layers, which docs/architecture.md draws) and the returns to a folder
already left, for each kind of private data.

    python experiments/trace_generate.py            # --dataset digits, --images, --data rows, --data HDF5
    python experiments/trace_generate.py --list     # and print each run's stops
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from swflow.core.layers import layer_of

FIRST_STEP = "step_once"
SIMULATOR_START = "run"  # the simulator's loop is entered (swflow.simulate): its setup follows, then the first step
ENTRY = "cmd_generate"  # the command's function: the flags are parsed when it is called


def folder_of(module: str) -> str:
    parts = module.split(".")
    return parts[0] if parts[0] != "swflow" or len(parts) < 3 else ".".join(parts[:2])


def trace(argv: list[str]) -> tuple[list[tuple[str, str]], int]:
    """The modules the command passes through, one entry per change of module, from the entry to the first step,
    and the index of the first of them inside the simulator's loop (its setup, then the first step)."""
    from swflow.cli import main

    roots = tuple(str(Path(m.__file__).parent) for m in _packages())
    stops: list[tuple[str, str]] = []  # (module, "call" or "return"), one per change of module

    class Reached(Exception):
        pass

    def module_of(frame) -> str | None:
        path = frame.f_code.co_filename
        return frame.f_globals.get("__name__") if path.startswith(roots) else None

    def note(module, how):
        if module is not None and (not stops or stops[-1][0] != module):
            stops.append((module, how))

    started, importing, handover = [], [0], []  # calls made while a module is imported (its body runs) are no stops

    def profile(frame, event, arg):
        if frame.f_code.co_name == "<module>":
            importing[0] += 1 if event == "call" else -1 if event == "return" else 0
            return
        if importing[0] > 0:
            return
        if event == "call":
            module = module_of(frame)
            if module is None:
                return
            if not started:
                if frame.f_code.co_name != ENTRY:
                    return
                started.append(frame)
            if frame.f_code.co_name == FIRST_STEP and module.startswith("swflow.simulate"):
                note(module, "call")
                sys.setprofile(None)
                raise Reached
            entering = frame.f_code.co_name == SIMULATOR_START and module.startswith("swflow.simulate")
            if entering and not handover:
                handover.append(len(stops))  # the run hands over to the loop: its setup follows
            note(module, "call")
        elif event == "return" and started and frame.f_back is not None:
            note(module_of(frame.f_back), "return")

    sys.setprofile(profile)
    try:
        main(argv)
    except Reached:
        return stops, (handover[0] if handover else len(stops))
    finally:
        sys.setprofile(None)
    raise SystemExit(f"swflow {' '.join(argv)} ended before its first step")


def _packages():
    import swflow

    found = [swflow]
    try:
        import autoencoders  # the public models, at the top level since issue 52
        found.append(autoencoders)
    except ImportError:
        pass
    return found


def folder_stops(stops: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The module changes collapsed to changes of folder: (folder, how it was reached)."""
    out: list[tuple[str, str]] = []
    for module, how in stops:
        if not out or out[-1][0] != folder_of(module):
            out.append((folder_of(module), how))
    return out


def summary(stops: list[tuple[str, str]], handover: int) -> dict:
    folders = folder_stops(stops)
    climbs = sum(how == "call" and layer_of(b) > layer_of(a) for (a, _), (b, how) in zip(folders, folders[1:]))
    seen, returns = set(), 0
    for folder, _ in folders:
        returns += folder in seen
        seen.add(folder)
    before = len(folder_stops(stops[:handover]))
    return {"stops": len(folders), "places": len({m for m, _ in stops}), "climbs": climbs, "returns": returns,
            "before the simulator": before, "in its setup": len(folders) - before}


def runs(tmp: Path, smoke: bool) -> dict[str, list[str]]:
    """The command lines traced: each kind of private data, the same small dpswflow-hist run."""
    import numpy as np

    from swflow.io.data import example_images

    images, _ = example_images()
    np.save(tmp / "private_images.npy", images[:300])
    rows = np.random.default_rng(0).normal(size=(300, 8)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    np.save(tmp / "rows.npy", rows)
    import h5py

    with h5py.File(tmp / "rows.h5", "w") as f:
        f["rows"] = rows
    common = ["--method", "dpswflow-hist", "--epsilon", "1", "--steps", "3", "--quiet", "--privacy-seed", "1",
              "--count-noise", "gaussian"]
    cases = {"dataset": ["--dataset", "digits"],
             "images": ["--images", str(tmp / "private_images.npy"), "--checkpoint", "digits-adv"],
             "rows": ["--data", str(tmp / "rows.npy"), "--manifold", "sphere"],
             "hdf5": ["--data", str(tmp / "rows.h5"), "--manifold", "sphere"]}
    if smoke:
        cases = {"rows": cases["rows"]}
    return {name: ["generate", *flags, *common, "--out", str(tmp / name)] for name, flags in cases.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="print every run's stops")
    parser.add_argument("--smoke", action="store_true", help="trace one small run (the suite's check)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        for name, argv_ in runs(Path(tmp), args.smoke).items():
            stops, handover = trace(argv_)
            counts = summary(stops, handover)
            print(f"{name:8s} " + "  ".join(f"{k} {v}" for k, v in counts.items()))
            if args.list:
                print("   " + " > ".join(f.removeprefix("swflow.") for f, _ in folder_stops(stops)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

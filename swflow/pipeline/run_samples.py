"""What a table run's privacy.json records of its samples file, so that `swflow verify` can make it again."""
from __future__ import annotations

import platform
from pathlib import Path

__all__ = ["samples_record", "with_samples", "made_here"]


def made_here() -> dict:
    """The versions and machine that decide whether samples come out byte for byte the same."""
    import torch

    from .. import __version__

    return {"swflow": __version__, "torch": torch.__version__, "machine": platform.machine()}


def samples_record(path: Path, n: int, seed: int) -> dict:
    """What privacy.json records of a table run's samples file, so that a reader can make it again."""
    return {"file": path.name, "n": n, "seed": seed, **made_here()}


def with_samples(report, record: dict):
    """``report`` with its run's samples recorded in its run_config (privacy.json only: model.pt's report is the
    release's, whatever was sampled from it)."""
    from dataclasses import replace

    return replace(report, run_config={**report.run_config, "samples": record})

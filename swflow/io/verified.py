"""The table models this machine's `swflow verify` checked in full: each named by its model.pt's SHA-256, in
$SWFLOW_CACHE/verified (~/.cache/swflow/verified). A file that is not there proves nothing; only this machine's
own verify writes one, after the model's particles, refitted from its release, equalled those it stores. `sample`
then reads the stored particles of a model.pt with that digest, rather than fit them again."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

from .outdir import atomic_write_text

__all__ = ["remember_verified", "recall_verified"]


def _folder() -> Path:
    return Path(os.environ.get("SWFLOW_CACHE", Path.home() / ".cache" / "swflow")) / "verified"


def remember_verified(digest: str, record: dict) -> None:
    """Say that the model.pt of SHA-256 ``digest`` passed every check here (``record``: what was checked)."""
    if not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise ValueError(f"a SHA-256 is 64 hex digits, got {digest!r}")
    _folder().mkdir(parents=True, exist_ok=True)
    atomic_write_text(_folder() / f"{digest}.json", json.dumps(record) + "\n")


def recall_verified(digest: str) -> dict | None:
    """What was checked of the model.pt of SHA-256 ``digest`` on this machine, or None."""
    path = _folder() / f"{digest}.json"
    if not re.fullmatch(r"[0-9a-f]{64}", digest or "") or not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None

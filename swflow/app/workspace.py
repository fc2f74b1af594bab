"""The owner's workspace behind the page: the folders it may touch, the files chosen, the schema, the settings.

Everything the page reads or writes goes through :meth:`Workspace.inside`: a path (typed, or an upload's) is
resolved, symlinks followed, and refused unless it lies in the owner's folder or a folder they named with
``--read``. Uploads land in FOLDER/uploads under fixed names (the role, not the file's own name, which could say
something private); runs in FOLDER/runs; the owner's key in FOLDER/keys.
"""
from __future__ import annotations

import json
import re
import secrets
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

__all__ = ["Workspace", "Settings", "ROLES", "TABLE_SUFFIXES", "OutsideFolders"]

#: the files an owner chooses, in the page's words
ROLES = {"private": "Private table", "public": "Public rows", "heldout": "Held-out rows"}
TABLE_SUFFIXES = (".csv", ".parquet")
#: a run's name: a folder name the page makes, never a path
_RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class OutsideFolders(PermissionError):
    """A path outside the folders the owner chose."""


@dataclass(frozen=True)
class Settings:
    """The release's settings as the Privacy step sets them (the same names as the command line's flags)."""

    epsilon: float = 1.0
    delta: float = 1e-9
    privacy_unit: str | None = None
    max_rows_per_unit: int | None = None
    adjacency: str = "replace-one"
    target: str | None = None
    run: str = "release-1"

    def checked(self) -> "Settings":
        """These settings, or a ValueError that says what to fix (the library checks the rest when it runs)."""
        if not self.epsilon > 0 or self.epsilon != self.epsilon:
            raise ValueError("Epsilon (ε) must be a number above 0: 1 is a strong guarantee, 10 a weaker one")
        if not 0 < self.delta < 1e-3:
            raise ValueError("Delta (δ) must lie in (0, 0.001): far below 1 / the number of people (1e-9 is usual)")
        if self.max_rows_per_unit is not None and (self.privacy_unit is None or self.max_rows_per_unit < 1):
            raise ValueError("Rows per unit is a whole number ≥ 1, and needs a Privacy unit column")
        if self.adjacency not in ("replace-one", "add-remove"):
            raise ValueError("Adjacency is replace-one (a row changed; the number of rows public) or add-remove")
        if not _RUN_NAME.match(self.run):
            raise ValueError("a run's name is letters, digits, '-', '_' or '.', at most 64 of them")
        return self


@dataclass
class Workspace:
    """One owner's state: their folder, the folders they let the page read, the chosen files, the schema being
    edited (JSON, as schema.json holds it), the settings; ``token`` is the secret every request must carry."""

    folder: Path
    readable: tuple[Path, ...] = ()
    max_upload: int = 200 * 2 ** 20
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    files: dict = field(default_factory=dict)
    schema: dict | None = None
    notes: dict = field(default_factory=dict)
    settings: Settings = field(default_factory=Settings)

    def __post_init__(self):
        self.folder = Path(self.folder).expanduser().resolve()
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "keys").mkdir(mode=0o700, exist_ok=True)  # the owner's private key: theirs alone
        self.readable = tuple(Path(p).expanduser().resolve() for p in self.readable)
        for path in self.readable:
            if not path.is_dir():
                raise ValueError(f"--read {path}: no such folder")
        self._restore()

    def _restore(self) -> None:
        """What a page started again on the same folder finds: its uploads and its schema.json (where it reads)."""
        for role in ROLES:
            found = [self.folder / "uploads" / f"{role}{suffix}" for suffix in TABLE_SUFFIXES]
            self.files.update({role: path for path in found if path.is_file()})
        if self.schema_path.is_file():
            try:
                from ..tables import Schema

                self.schema = json.loads(self.schema_path.read_text())
                Schema.from_json(self.schema)
            except ValueError:  # the owner edits it by hand too: the page starts without it, and says nothing
                self.schema = None

    # -- paths -------------------------------------------------------------------------------------------------
    def inside(self, path: str | Path, *, write: bool = False) -> Path:
        """``path`` resolved (relative ones from the owner's folder), refused unless it lies in the owner's folder
        (or, to read, a ``--read`` folder)."""
        resolved = (self.folder / Path(path).expanduser()).resolve()
        roots = (self.folder,) if write else (self.folder, *self.readable)
        if not any(resolved == root or root in resolved.parents for root in roots):
            raise OutsideFolders(f"{path} lies outside the folders this page may {'write' if write else 'read'} "
                                 f"({', '.join(str(r) for r in roots)}); start `swflow app` with --read FOLDER "
                                 "to let it read another")
        return resolved

    def upload_path(self, role: str, filename: str) -> Path:
        suffix = Path(filename or "").suffix.lower()
        if role not in ROLES:
            raise ValueError(f"an upload is one of {list(ROLES.values())}")
        if suffix not in TABLE_SUFFIXES:
            raise ValueError(f"{ROLES[role]}: a .csv or .parquet file, not {suffix or 'a file without a suffix'}")
        (self.folder / "uploads").mkdir(exist_ok=True)
        for old in TABLE_SUFFIXES:  # one file a role: a .csv replaced by a .parquet leaves no stale copy
            (self.folder / "uploads" / f"{role}{old}").unlink(missing_ok=True)
        return self.folder / "uploads" / f"{role}{suffix}"

    def choose(self, role: str, path: str | Path) -> Path:
        """``path`` (inside the folders) as the file of ``role``."""
        resolved = self.inside(path)
        if resolved.suffix.lower() not in TABLE_SUFFIXES or not resolved.is_file():
            raise ValueError(f"{ROLES[role]}: no .csv or .parquet file at {path}")
        self.files[role] = resolved
        return resolved

    @property
    def schema_path(self) -> Path:
        return self.folder / "schema.json"

    def run_dir(self, name: str | None = None) -> Path:
        name = name or self.settings.run
        if not _RUN_NAME.match(name):
            raise ValueError("a run's name is letters, digits, '-', '_' or '.', at most 64 of them")
        return self.folder / "runs" / name

    def runs(self) -> list[str]:
        """The finished runs in the owner's folder (a folder with privacy.json), newest first."""
        root = self.folder / "runs"
        found = [p for p in root.iterdir() if (p / "privacy.json").is_file()] if root.is_dir() else []
        return [p.name for p in sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)]

    def free_run_name(self) -> str:
        """The first ``release-N`` with no folder yet."""
        number = 1
        while (self.folder / "runs" / f"release-{number}").exists():
            number += 1
        return f"release-{number}"

    @property
    def key_path(self) -> Path:
        return self.folder / "keys" / "owner.pem"

    # -- state -------------------------------------------------------------------------------------------------
    def set_settings(self, **changes) -> Settings:
        self.settings = replace(self.settings, **changes).checked()
        return self.settings

    def save_schema(self, schema_json: dict) -> Path:
        """Check ``schema_json`` (a SchemaError says what is wrong) and write FOLDER/schema.json."""
        from ..tables import Schema

        Schema.from_json(schema_json)
        self.schema = schema_json
        self.schema_path.write_text(json.dumps(schema_json, indent=2) + "\n")
        return self.schema_path

    def state(self) -> dict:
        """What the page shows of the workspace (paths and settings; never a row)."""
        return {"folder": str(self.folder), "files": {k: str(v) for k, v in self.files.items()},
                "settings": asdict(self.settings), "schema": self.schema is not None}

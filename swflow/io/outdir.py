"""Output directories that only a finished run replaces.

A command writes into a staging sibling ``.NAME.partial`` (checkpoints included) and swaps it in
for ``NAME`` when it has finished. So an interrupted or failed run never touches a previous result,
and ``--resume`` continues from the staging directory. Every check runs before anything on disk
changes:

* an existing ``NAME`` is replaced only with ``--overwrite``, and only if it is an swflow run
  (it holds ``privacy.json`` or the run marker); never when it contains one of the command's inputs;
* ``--resume`` continues an interrupted run; a finished run has nothing to resume and says so;
* an interrupted run is never discarded silently: without ``--resume`` or ``--overwrite`` it is
  refused, with the two ways forward.

A staging directory that holds no checkpoint when the command fails is removed (no empty output
folders are left behind); one with a checkpoint stays for ``--resume``.

One writer per run: the command holds an OS lock on ``LOCK`` inside its staging directory until it
exits; the kernel releases it when the process dies, however it dies. A second command on the same
``--out`` is refused while the first is alive (and never told to resume it, nor allowed to discard it).
"""
from __future__ import annotations

import json
import os
import shutil
from contextlib import contextmanager
from pathlib import Path

__all__ = ["MARKER", "RunBusy", "RunDir", "atomic_write_bytes", "atomic_write_text", "staged"]

MARKER = ".swflow-run"
LOCK = ".swflow-lock"
CHECKPOINT_GLOB = "checkpoint*.pt"


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary sibling: readers never see half a file, and two processes
    writing the same path (a shared cache) never share a temporary."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    """:func:`atomic_write_bytes` of ``text`` in UTF-8."""
    return atomic_write_bytes(path, text.encode("utf-8"))


class RunBusy(ValueError):
    """Another live process is writing the same output directory."""


def _lock(path: Path, final: Path):
    """An exclusive, non-blocking OS lock on ``path`` (created if needed), held while the returned file
    stays open; the holder's pid is written into it. None where the OS has no flock (not POSIX)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return None
    handle = open(path, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        holder = handle.read().strip() or "unknown"
        handle.close()
        raise RunBusy(f"another swflow process (pid {holder}) is writing {final}; wait for it to finish, or stop "
                      "it and start again (an interrupted flow run continues with --resume; a table run, one "
                      "release, is simply run again)") from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def _is_run(directory: Path) -> bool:
    return (directory / "privacy.json").is_file() or (directory / MARKER).is_file()


def _inside(path: Path, directory: Path) -> bool:
    try:
        path.resolve().relative_to(directory.resolve())
        return True
    except ValueError:
        return False


class RunDir:
    """The output directory of one command: checks, a staging directory, the final swap.

    Parameters
    ----------
    final : the directory the user named (``--out``)
    overwrite, resume : the user's flags
    inputs : files the command reads; a directory that holds one of them is never replaced
    resumable : False for commands that cannot resume (``sample``): an interrupted staging directory of
        theirs holds nothing worth keeping and is replaced without asking
    """

    def __init__(self, final: str | Path, *, overwrite: bool = False, resume: bool = False,
                 inputs: tuple[str | Path, ...] = (), resumable: bool = True):
        self.final = Path(final)
        if not self.final.name or self.final.name in (".", ".."):
            raise ValueError(f"--out {str(final)!r} names no directory: give a path such as runs/my-run")
        self.staging = self.final.with_name(f".{self.final.name}.partial")
        self.overwrite, self.resume, self.resumable = overwrite, resume, resumable
        self._lock = None
        if self.staging.is_dir():  # a live writer there refuses us before any advice is given
            self._lock = _lock(self.staging / LOCK, self.final)
        self._check([Path(p) for p in inputs if p is not None])

    def _check(self, inputs: list[Path]) -> None:
        final, staging = self.final, self.staging
        if final.exists() and not final.is_dir():
            raise ValueError(f"--out {final} is a file, not a directory: choose a directory path")
        for parent in final.resolve().parents:
            if _is_run(parent):
                raise ValueError(f"--out {final} lies inside the swflow run {parent}: a finished run is never "
                                 "written into; choose a directory outside it")
        for path in inputs:
            if _inside(path, final) or _inside(path, staging):
                raise ValueError(f"--out {final} holds the input {path}: write the result somewhere else")
        if staging.is_dir() and not (staging / MARKER).is_file():
            raise ValueError(f"{staging} exists but was not made by swflow: move it away or choose another --out "
                             "(nothing was changed)")
        occupied = final.is_dir() and any(final.iterdir())
        if self.resume:
            if not staging.is_dir() and occupied:
                if _is_run(final):
                    raise ValueError(f"{final} is a finished run: there is nothing to resume (its budget is spent); "
                                     "use --overwrite to replace it with a new run, or another --out")
                raise ValueError(f"{final} is not empty and holds no interrupted swflow run to resume")
        elif staging.is_dir() and not self.overwrite and self.resumable:
            raise ValueError(f"an interrupted run is waiting in {staging}: pass --resume to continue it, or "
                             "--overwrite to discard it and start over")
        if occupied and not self.resume:
            if not self.overwrite:
                raise ValueError(f"{final} exists and is not empty; pass --resume to continue an interrupted run "
                                 "there or --overwrite to replace it once the new run has finished")
            if not _is_run(final):
                raise ValueError(f"--overwrite replaces only swflow run directories, and {final} holds no "
                                 "privacy.json: choose another --out (nothing was changed)")
        if self.resume and occupied and not _is_run(final):
            raise ValueError(f"{final} is not an swflow run directory: choose another --out")

    def open(self) -> Path:
        """Create (or, resuming, reuse) the staging directory and return it.

        A staging directory whose run had finished (outputs written, checkpoint removed) before the
        swap was interrupted is swapped in now and never run again: that would spend the budget twice."""
        if self.resume and (self.staging / "privacy.json").is_file() and \
                not any(self.staging.rglob(CHECKPOINT_GLOB)):
            self.commit()
            raise ValueError(f"the run in {self.staging} had finished before it was interrupted; it is now "
                             f"{self.final} (nothing was run again)")
        if self.staging.is_dir() and not self.resume:  # --overwrite, or a non-resumable command's leftover
            shutil.rmtree(self.staging)
            self._release()
        try:
            self.staging.mkdir(parents=True, exist_ok=True)
            if self._lock is None:
                self._lock = _lock(self.staging / LOCK, self.final)
            atomic_write_text(self.staging / MARKER, json.dumps({"final": self.final.name}) + "\n")
        except OSError as err:
            raise ValueError(f"cannot write the output directory next to {self.final}: {err.strerror or err}") \
                from err
        return self.staging

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def commit(self) -> Path:
        """Swap the finished staging directory in for the final one."""
        trash = None
        if self.final.is_dir():
            if any(self.final.iterdir()):
                trash = self.final.with_name(f".{self.final.name}.replaced")
                shutil.rmtree(trash, ignore_errors=True)
                os.replace(self.final, trash)
            else:
                self.final.rmdir()
        os.replace(self.staging, self.final)
        if trash is not None:
            shutil.rmtree(trash, ignore_errors=True)
        (self.final / LOCK).unlink(missing_ok=True)  # a finished run has no writer
        self._release()
        return self.final

    def abandon(self) -> None:
        """After a failure: drop the staging directory unless it holds a checkpoint to resume from."""
        if self.staging.is_dir() and not any(self.staging.rglob(CHECKPOINT_GLOB)):
            shutil.rmtree(self.staging, ignore_errors=True)
        self._release()


@contextmanager
def staged(out: str, *, overwrite: bool = False, resume: bool = False, inputs: tuple = (), resumable: bool = True):
    """Work in a staging directory that replaces ``out`` only once the work has finished (:class:`RunDir`); the
    checks run before anything on disk changes."""
    run_dir = RunDir(out, overwrite=overwrite, resume=resume, inputs=inputs, resumable=resumable)
    work = run_dir.open()
    try:
        yield work
    except BaseException:
        run_dir.abandon()
        raise
    run_dir.commit()

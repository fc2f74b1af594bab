"""The errors every layer may raise and the command line turns into exit statuses: bad input is a ValueError
(status 2), with :class:`SettingsError` for a setting the command line names as a flag; a run that failed for
another reason is a :class:`RunFailed` (status 1)."""
from __future__ import annotations

__all__ = ["RunFailed", "SettingsError"]


class SettingsError(ValueError):
    """A setting that cannot run (too large for this machine, or a bad combination): its message names settings
    by their field names, which the command line turns into flags."""


class RunFailed(RuntimeError):
    """A run that failed for a reason other than its input (exit status 1)."""

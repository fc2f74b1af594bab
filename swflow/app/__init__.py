"""The data owner's page (`swflow app`): a private file to a signed release in the browser, on the owner's own
machine. Every step runs the `swflow` command it shows (swflow/app/commands.py); the page has no logic of its own
beyond the page. Needs the ``app`` extra: ``pip install 'swflow[app]'``."""
from __future__ import annotations

__all__ = ["serve", "create_app", "Workspace"]


def __getattr__(name: str):
    if name in ("serve", "create_app"):
        from . import server

        return getattr(server, name)
    if name == "Workspace":
        from .workspace import Workspace

        return Workspace
    raise AttributeError(name)

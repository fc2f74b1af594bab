"""`swflow app`: the data owner's page, served on 127.0.0.1 from a folder of the owner's choosing.

Starlette (an ASGI framework from the registry) serves server-rendered pages from Jinja2 templates, with one small
script of the package's own for the progress bars: nothing is fetched from the network at run time. Each step's
handler lives in :mod:`swflow.app.pages` or :mod:`swflow.app.steps`; :class:`swflow.app.guard.Guard` checks every
request first.
"""
from __future__ import annotations

from pathlib import Path

__all__ = ["create_app", "serve"]

HERE = Path(__file__).resolve().parent


def create_app(workspace):
    """The ASGI app of ``workspace`` (a :class:`~swflow.app.workspace.Workspace`), guarded."""
    from starlette.applications import Starlette
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles
    from starlette.templating import Jinja2Templates

    from . import pages, steps
    from .guard import Guard
    from .jobs import Jobs

    templates = Jinja2Templates(directory=str(HERE / "templates"))
    routes = [*pages.routes(), *steps.routes(),
              Mount("/static", app=StaticFiles(directory=str(HERE / "static")), name="static")]
    app = Starlette(routes=routes, exception_handlers={Exception: pages.failed})
    app.state.workspace, app.state.templates = workspace, templates
    app.state.jobs = Jobs(cwd=str(workspace.folder))
    return Guard(app, workspace)


def serve(folder, *, port: int = 0, open_browser: bool = True, readable=(), max_upload_mb: int = 200) -> None:
    """Serve the page until interrupted: print its URL (with the token) at once, open it in the browser unless
    ``open_browser`` is False. ``port`` 0 takes a free one."""
    import socket
    import webbrowser

    import uvicorn

    from .workspace import Workspace

    workspace = Workspace(folder, readable=tuple(readable), max_upload=max_upload_mb * 2 ** 20)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))  # loopback only: the page is the owner's, on the owner's machine
    sock.listen(64)  # a browser opened at once waits in the backlog until the server accepts
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/?token={workspace.token}"
    app = create_app(workspace)
    print(f"swflow app: the owner's page for {workspace.folder}\n    {url}\n"
          "It reads and writes that folder only (and folders named with --read); Ctrl-C stops it. A run already "
          "finished stays on disk.", flush=True)
    if open_browser:
        webbrowser.open(url)
    config = uvicorn.Config(app, log_level="warning", access_log=False)  # no URL (or token) in any log
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    finally:
        app.app.state.jobs.cancel_all()

"""`swflow app`: the data owner's page (swflow/app), served on 127.0.0.1."""
from __future__ import annotations

import argparse

from ._common import UsageError


def cmd_app(args) -> int:
    try:
        from ..app import serve
        import starlette  # noqa: F401  (the extra's packages, said plainly when absent)
        import uvicorn  # noqa: F401
    except ImportError:
        raise UsageError("the owner's page needs its extra: pip install 'swflow[app]'") from None
    if args.max_upload_mb < 1:
        raise UsageError("--max-upload-mb is a whole number of megabytes, at least 1")
    serve(args.folder, port=args.port, open_browser=not args.no_browser, readable=args.read or (),
          max_upload_mb=args.max_upload_mb)
    return 0


def register(sub) -> None:
    p = sub.add_parser("app", help="the data owner's page: a private table to a signed release, in the browser",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                       description="Serve a page on 127.0.0.1 that walks a data owner from a private table to a "
                       "verified, signed release: Data, Schema, Privacy, Preview (public rows only), Release, the "
                       "owner's Report, then Verify, Sign and Download. Every step runs the swflow command it shows "
                       "(copy it to rerun the step without the page). The printed URL carries a token that every "
                       "request must hold; the page reads and writes FOLDER only (and folders named with --read); "
                       "nothing is fetched from the network. Needs `pip install 'swflow[app]'`.")
    p.add_argument("folder", nargs="?", default="swflow-app", help="the owner's folder: uploads, schema.json, "
                   "runs/ and keys/ live here (made if absent)")
    p.add_argument("--port", type=int, default=0, help="the port on 127.0.0.1 (0: a free one)")
    p.add_argument("--no-browser", action="store_true", help="print the URL only; do not open a browser")
    p.add_argument("--read", action="append", metavar="FOLDER", help="a folder whose files the page may read "
                   "(a path typed on the Data step); repeat for more")
    p.add_argument("--max-upload-mb", type=int, default=200, help="the largest file the page takes by upload (a "
                   "larger one: give its path)")
    p.set_defaults(func=cmd_app)

"""Every request to the page passes here first: the host, the token, the origin of a form, the size of an upload.

- The server binds 127.0.0.1 only; a request naming another host (a DNS-rebinding page) is refused.
- The token printed in the URL (as Jupyter does) is traded on first use for a cookie (HttpOnly, SameSite=Strict)
  and the URL without it, so it stays out of the history; a request with neither is refused.
- A form (POST) must come from the page itself (its Origin, where sent, is the page's) and carry the token.
- A request body larger than the workspace's upload limit, or of unknown length, is refused before it is read.
"""
from __future__ import annotations

import secrets
from urllib.parse import parse_qsl, urlencode

__all__ = ["Guard", "COOKIE", "LOCAL_HOSTS"]

COOKIE = "swflow_token"
LOCAL_HOSTS = ("127.0.0.1", "localhost")


class Guard:
    """ASGI middleware around the page's app (module docstring)."""

    def __init__(self, app, workspace):
        self.app, self.workspace = app, workspace

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        if host.rsplit(":", 1)[0].strip("[]") not in LOCAL_HOSTS:
            return await _refuse(send, 403, "this page answers on 127.0.0.1 only")
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if self._matches(query.get("token")):  # first visit: the token becomes a cookie, the URL loses it
            rest = urlencode({k: v for k, v in query.items() if k != "token"})
            location = scope["path"] + (f"?{rest}" if rest else "")
            cookie = f"{COOKIE}={self.workspace.token}; HttpOnly; SameSite=Strict; Path=/"
            return await _respond(send, 303, b"", [(b"location", location.encode()),
                                                   (b"set-cookie", cookie.encode())])
        cookies = dict(part.strip().split("=", 1) for part in headers.get("cookie", "").split(";") if "=" in part)
        if not (self._matches(cookies.get(COOKIE)) or self._matches(headers.get("x-swflow-token"))):
            return await _refuse(send, 403, "open the page through the URL `swflow app` printed: it carries the "
                                            "token this page asks of every request")
        if scope["method"] not in ("GET", "HEAD"):
            origin = headers.get("origin")
            if origin is not None and origin.split("://", 1)[-1] != host:
                return await _refuse(send, 403, "a form of this page is sent from this page only")
            length = headers.get("content-length")
            if length is None and "chunked" in headers.get("transfer-encoding", ""):
                return await _refuse(send, 411, "send a request body of a stated length")
            if length is not None and not length.isdigit():
                return await _refuse(send, 400, "a request body's length is a whole number")
            if length is not None and int(length) > self.workspace.max_upload:
                return await _refuse(send, 413, f"the file is larger than this page's upload limit of "
                                                f"{self.workspace.max_upload // 2 ** 20} MB: give its path on this "
                                                "machine instead, or start `swflow app --max-upload-mb N`")
        return await self.app(scope, receive, send)

    def _matches(self, given) -> bool:
        return isinstance(given, str) and secrets.compare_digest(given.encode(), self.workspace.token.encode())


async def _refuse(send, status: int, words: str):
    await _respond(send, status, f"swflow app: {words}\n".encode(), [(b"content-type", b"text/plain; charset=utf-8")])


async def _respond(send, status: int, body: bytes, headers: list):
    await send({"type": "http.response.start", "status": status,
                "headers": [*headers, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})

"""`swflow app` started as an owner starts it, for the page's tests: a process of its own on 127.0.0.1, its URL read
from what it prints."""
from __future__ import annotations

import http.client
import os
import subprocess
import sys
import urllib.parse
from pathlib import Path

from swflow.tables import example_table


def example_files(folder: Path) -> dict[str, Path]:
    """The guide's example (docs/tables.md): a private table, held-out rows and public rows, as CSV files."""
    folder.mkdir(parents=True, exist_ok=True)
    frame, _ = example_table(8000, seed=7)
    files = {"private": folder / "private.csv", "heldout": folder / "heldout.csv", "public": folder / "public.csv"}
    frame[:4000].to_csv(files["private"], index=False)
    frame[4000:].to_csv(files["heldout"], index=False)
    example_table(400, seed=99)[0].to_csv(files["public"], index=False)
    return files


class App:
    """A running `swflow app FOLDER --no-browser` and its URL (with the token)."""

    def __init__(self, folder: Path, *extra: str):
        self.folder = folder
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen([sys.executable, "-m", "swflow.cli", "app", str(folder), "--no-browser", *extra],
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.printed = []
        self.url = None
        for line in self.process.stdout:  # its three lines: the folder, the URL, what it may touch
            self.printed.append(line)
            if line.strip().startswith("http://"):
                self.url = line.strip()
            if line.startswith("It reads"):
                break
        if self.url is None:
            raise RuntimeError("swflow app printed no URL:\n" + "".join(self.printed))
        parts = urllib.parse.urlsplit(self.url)
        self.port, self.token = parts.port, dict(urllib.parse.parse_qsl(parts.query))["token"]

    def request(self, method: str, path: str, *, body: bytes = b"", headers: dict | None = None,
                token: bool = True) -> tuple[int, bytes]:
        """(status, body) of one request; with the page's cookie unless ``token`` is False."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        sent = {"Host": f"127.0.0.1:{self.port}", **({"Cookie": f"swflow_token={self.token}"} if token else {}),
                **(headers or {})}
        connection.request(method, path, body=body, headers=sent)
        response = connection.getresponse()
        return response.status, response.read()

    def form(self, path: str, fields: dict, **kwargs) -> tuple[int, bytes]:
        return self.request("POST", path, body=urllib.parse.urlencode(fields).encode(),
                            headers={"Content-Type": "application/x-www-form-urlencoded", **kwargs.pop("headers", {})},
                            **kwargs)

    def close(self) -> str:
        """Stop the server; everything it printed."""
        self.process.terminate()
        rest, _ = self.process.communicate(timeout=60)
        return "".join(self.printed) + (rest or "")

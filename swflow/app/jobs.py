"""The page's long steps, each a `swflow` command run in a process of its own: its progress read off the bars it
draws, cancel by ending that process, and one writer a run folder at a time.

A command writes nothing until it finishes (its output folder is staged, swflow/io/outdir.py), so a cancelled
step, a closed tab or a killed page leaves no half-written release; a finished one stays on disk whatever the page
does next. The page shows a command's own words (its errors name columns and rules, never a value), never its
input.
"""
from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from dataclasses import dataclass, field

__all__ = ["Job", "Jobs", "Busy"]

#: a tqdm bar as it is drawn: "description:  42%|####      | 21/50 [...]"
_BAR = re.compile(r"(?P<what>[^\r\n|]*?):\s*(?P<percent>\d{1,3})%\|")
_KEPT_LINES = 40


class Busy(RuntimeError):
    """A second writer for a run folder that one is already writing."""


@dataclass
class Job:
    """One step's commands (run one after the other), their state and what they printed."""

    key: str
    title: str
    steps: list
    state: str = "running"  # running, done, failed, cancelled
    phase: str = "starting"
    percent: int = 0
    lines: list = field(default_factory=list)
    started: float = field(default_factory=time.time)
    finished: float | None = None
    _process: subprocess.Popen | None = None
    _cancelled: bool = False

    def run(self, cwd) -> None:
        """Run every step (the thread's body); the first that fails ends the job."""
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        for step in self.steps:
            if self._cancelled:
                break
            self.phase, self.percent = step.command.split(" ")[1], 0
            self._process = subprocess.Popen(step.argv(), cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            self._read(self._process.stdout)
            if self._process.wait() != 0:
                self.state = "cancelled" if self._cancelled else "failed"
                break
        else:
            self.state, self.percent = "done", 100
        if self._cancelled and self.state == "running":
            self.state = "cancelled"
        self.finished = time.time()

    def _read(self, stream) -> None:
        """Lines and bar redraws (a bar ends in \\r) as they come: the phase and percentage from bars, the rest kept."""
        buffer = b""
        while True:
            chunk = stream.read1(4096) if hasattr(stream, "read1") else stream.read(4096)
            if not chunk:
                break
            buffer += chunk
            *parts, buffer = re.split(rb"[\r\n]", buffer)
            for part in parts:
                self._line(part.decode("utf-8", "replace"))
        self._line(buffer.decode("utf-8", "replace"))

    def _line(self, text: str) -> None:
        text = text.strip()
        if not text:
            return
        bar = _BAR.search(text)
        if bar:
            self.phase, self.percent = bar["what"].strip() or self.phase, min(100, int(bar["percent"]))
            return
        self.lines = (self.lines + [text])[-_KEPT_LINES:]

    def cancel(self) -> None:
        self._cancelled = True
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()

    def to_json(self) -> dict:
        return {"key": self.key, "title": self.title, "state": self.state, "phase": self.phase,
                "percent": self.percent, "lines": self.lines[-12:],
                "seconds": round((self.finished or time.time()) - self.started, 1),
                "commands": [step.command for step in self.steps]}


class Jobs:
    """The page's jobs by key (a run folder, or a step's name): one running a key at a time."""

    def __init__(self, cwd):
        self.cwd, self._jobs, self._lock = cwd, {}, threading.Lock()

    def start(self, key: str, title: str, steps: list) -> Job:
        with self._lock:
            current = self._jobs.get(key)
            if current is not None and current.state == "running":
                raise Busy(f"{title}: another tab or window is already running it ({current.phase}); wait for it to "
                           "finish or cancel it there")
            job = self._jobs[key] = Job(key, title, list(steps))
        threading.Thread(target=job.run, args=(self.cwd,), daemon=True, name=f"swflow-app {key}").start()
        return job

    def get(self, key: str) -> Job | None:
        return self._jobs.get(key)

    def cancel_all(self) -> None:
        for job in list(self._jobs.values()):
            job.cancel()

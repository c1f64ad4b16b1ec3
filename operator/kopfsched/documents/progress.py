"""Progress lines on stderr while a long input is read."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import IO


class Progress:
    """Progress lines on stderr while a long load runs: silent for the first `after`
    seconds (small inputs print nothing), then a line at most every `every` seconds."""

    def __init__(self, *, stream: IO[str] | None = None, clock: Callable[[], float] = time.monotonic,
                 after: float = 2.0, every: float = 2.0) -> None:
        self.stream = stream
        self.clock = clock
        self.after, self.every = after, every
        self.started = clock()
        self.next_line = self.started + after
        self.printed = False
        self.objects = 0

    def _print(self, line: str) -> None:
        print(f"kopfsched: {line}", file=self.stream or sys.stderr, flush=True)
        self.printed = True

    def reading(self, source: str, done: int, total: int) -> None:
        now = self.clock()
        if now < self.next_line:
            return
        self.next_line = now + self.every
        size = _megabytes(total or done)
        # What has been parsed so far, never bytes merely buffered: the fast YAML path first
        # checks the whole file (no document parsed yet), then parses it.
        share = 100 * done / total if total else 0.0
        what = (f"{share:.1f}% parsed" if share < 10 else f"{share:.0f}% parsed") if done else \
            "checking it before parsing"
        # The fast YAML path hands its objects over at the end: no count before then.
        objects = f", {self.objects} objects so far" if self.objects else ""
        self._print(f"reading {source} ({size}): {what}{objects} ({now - self.started:.0f}s)")

    def done(self, files: int) -> None:
        if self.printed:
            self._print(f"read {self.objects} objects from {files} file(s) in {self.clock() - self.started:.1f}s")


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.0f} MB" if size >= 1e6 else f"{size} bytes"

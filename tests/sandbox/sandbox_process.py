"""`kopfsched sandbox` in a process of its own, as a user starts it: the command, its environment
(this checkout's operator/ first on PYTHONPATH) and reading its stdout up to a line."""
from __future__ import annotations

import os
import pathlib
import select
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).parents[2]


def sandbox_command(*args: str) -> list[str]:
    return [sys.executable, '-m', 'kopfsched', 'sandbox', *args]


def environment() -> dict[str, str]:
    return {**os.environ, 'PYTHONPATH': os.pathsep.join([str(ROOT / 'operator'), os.environ.get('PYTHONPATH', '')])}


def read_until(process: subprocess.Popen[bytes], marker: str, timeout: float) -> str:
    """stdout up to `marker` (read unbuffered: select() must see every byte); fails with what was
    printed on stderr otherwise."""
    assert process.stdout is not None
    seen = b''
    deadline = time.monotonic() + timeout
    while marker.encode() not in seen:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or process.poll() is not None:
            err = process.communicate(timeout=10)[1] if process.poll() is not None else b''
            pytest.fail(f'the sandbox did not print {marker!r}; stdout: {seen!r}; stderr: {err[-2000:]!r}')
        ready, _, _ = select.select([process.stdout], [], [], min(remaining, 1.0))
        if ready:
            seen += os.read(process.stdout.fileno(), 65536)
    return seen.decode()

"""Which files an input names, and their bytes, as `kubectl apply -f` takes them:

    FILE      a file
    DIR       every .yaml, .yml and .json file directly in it, in name order (as kubectl -f DIR)
    -         standard input (once)

Inputs over `MAX_INPUT_BYTES` are refused, and binary data is recognised before it is parsed.
"""

from __future__ import annotations

import os
import stat as statmode
import sys
from collections.abc import Iterable, Iterator
from typing import IO

STDIN = "-"
STDIN_NAME = "<stdin>"
SUFFIXES = (".yaml", ".yml", ".json")
MAX_INPUT_BYTES = 1 << 30
"""1 GiB: ten times a 5000-node, 50 000-pod snapshot; a larger input is refused, not swapped."""


def expand(paths: Iterable[str], problems: list[str]) -> Iterator[str]:
    """The files `paths` name, in order (a directory's in name order); problems appended."""
    stdin_used = False
    for path in paths:
        if path == STDIN:
            if stdin_used:
                problems.append(f"{STDIN_NAME}: standard input can be read only once")
                continue
            stdin_used = True
            yield path
        elif os.path.isdir(path):
            try:
                names = sorted(name for name in os.listdir(path) if name.endswith(SUFFIXES))
            except OSError as exc:
                problems.append(f"{path}: cannot read: {exc.strerror or exc}")
                continue
            files = [os.path.join(path, name) for name in names if os.path.isfile(os.path.join(path, name))]
            if not files:
                problems.append(f"{path}: no .yaml, .yml or .json files in the directory")
            yield from files
        else:
            yield path


def read(path: str, problems: list[str]) -> bytes | None:
    """The input's bytes, or None with a problem: unreadable, too large, binary."""
    name = STDIN_NAME if path == STDIN else path
    too_large = f"{name}: larger than {_size(MAX_INPUT_BYTES)}, the input limit"
    binary = f"{name}: binary data, not YAML or JSON"
    try:
        if path == STDIN:
            data = _head_then_rest(sys.stdin.buffer)
        else:
            with open(path, "rb") as stream:
                if not _size_ok(stream):
                    problems.append(too_large)
                    return None
                data = _head_then_rest(stream)
    except OSError as exc:
        problems.append(f"{name}: cannot read: {exc.strerror or exc}")
        return None
    if data is None:  # recognised in the first 8 KiB: /dev/zero is not read up to the limit
        problems.append(binary)
        return None
    if len(data) > MAX_INPUT_BYTES:  # stdin, a pipe or a device: read up to the limit
        problems.append(too_large)
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        problems.append(f"{name}: line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})")
        return None
    return data


def _head_then_rest(stream: IO[bytes]) -> bytes | None:
    """Up to MAX_INPUT_BYTES + 1 bytes, or None when the first 8 KiB hold a NUL (binary)."""
    head = stream.read(8192)
    if b"\0" in head:
        return None
    return head + stream.read(MAX_INPUT_BYTES + 1 - len(head))


def _size_ok(stream: IO[bytes]) -> bool:
    """False for a regular file over the limit (refused without reading it)."""
    try:
        info = os.fstat(stream.fileno())
    except OSError:
        return True
    return not (statmode.S_ISREG(info.st_mode) and info.st_size > MAX_INPUT_BYTES)



def _size(size: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} bytes"

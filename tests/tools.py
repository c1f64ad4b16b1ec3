"""Command-line tools the tests run, found the way an installed test extra puts them: next
to the interpreter running the tests (a virtualenv's bin/ need not be on PATH), then on
PATH. A declared test dependency that is missing fails the test: a skip would hide it."""

from __future__ import annotations

import pathlib
import shutil
import sys

import pytest


def tool(name: str, *, package: str) -> str:
    """The path of `name`; fails naming the package of the test extra that provides it."""
    beside = pathlib.Path(sys.executable).parent / name
    if beside.is_file():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} not found next to {sys.executable} nor on PATH: "
                    f"install the test extra (pip install -e '.[test]'), which brings {package}")
    return found

"""The API emulator is not part of a cluster installation: kmock comes with the `sandbox` extra,
and `kopfsched sandbox` without it says how to get it in one line, exit status 1."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

from kopfsched.cli import main

ROOT = Path(__file__).resolve().parent.parent


def test_sandbox_without_the_extra_names_it(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "kmock", None)  # as if not installed
    monkeypatch.chdir(tmp_path)
    assert main(["sandbox"]) == 1
    out, err = capsys.readouterr()
    assert (out, err) == ("", "kopfsched sandbox needs the API emulator: pip install 'kopfsched[sandbox]'\n")


def test_kmock_is_in_the_sandbox_extra_only_and_the_test_extra_takes_it():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.startswith("kmock")]
    assert project["optional-dependencies"]["sandbox"] == ["kmock==0.8"]
    assert "kopfsched[sandbox]" in project["optional-dependencies"]["test"]

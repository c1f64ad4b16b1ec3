"""Installs the example out-of-tree package examples/qos-sort-plugin for this session.

The suite must work on a machine that only ran `pip install -e '.[test]'`, offline too.
So, in this order:

1. already installed (e.g. `pip install -e examples/qos-sort-plugin`): use it;
2. `pip install --no-deps --no-index --no-build-isolation --target <tmp>`: a real install of
   the package as its pyproject.toml declares it, into a temporary directory put on
   sys.path (the environment is left untouched), built with the setuptools of this
   environment (the `test` extra brings it: Python 3.12 venvs have none), so no index
   is needed;
3. else an isolated build (pip fetches setuptools from the index or its cache).

If none works the tests fail, naming pip's error: they never skip.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pathlib
import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.outoftree.example import DISTRIBUTION, EXAMPLE


@pytest.fixture(scope="session")
def qos_sort_package(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """How the example got installed: "environment" or "pip"."""
    if _installed():
        yield "environment"
        return
    site = tmp_path_factory.mktemp("site-packages")
    paths = [str(site)]
    errors = _pip_install(site)
    assert errors is None, f"pip could not install examples/qos-sort-plugin:\n{errors}"
    how = "pip"
    sys.path[:0] = paths
    importlib.invalidate_caches()
    try:
        assert _installed(), f"examples/qos-sort-plugin is still not installed after the {how} install"
        yield how
    finally:
        for path in paths:
            sys.path.remove(path)
        for module in [m for m in sys.modules if m.split(".")[0] == "kopfsched_qos_sort"]:
            del sys.modules[module]
        importlib.invalidate_caches()


def _installed() -> bool:
    try:
        importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def _pip_install(site: pathlib.Path) -> str | None:
    """None once installed, else what pip said (offline build first, then an isolated one)."""
    # Build from a copy: setuptools leaves build/ and *.egg-info in the tree it builds.
    source = site.parent / "qos-sort-plugin-source"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--disable-pip-version-check",
               "--target", str(site), str(source)]
    errors = []
    for extra in (["--no-index", "--no-build-isolation"], []):
        try:
            done = subprocess.run([*command[:4], *extra, *command[4:]], capture_output=True, text=True, timeout=300,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            errors.append(f"{' '.join(extra) or 'isolated build'}: {exc}")
            continue
        if done.returncode == 0:
            return None
        errors.append(f"{' '.join(extra) or 'isolated build'}: {done.stderr.strip()}")
    return "\n".join(errors)

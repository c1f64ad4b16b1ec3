"""Installs the example out-of-tree package examples/qos-sort-plugin for this session.

The suite must work on a machine that only ran `pip install -e '.[test]'`, offline too.
So, in this order:

1. already installed (e.g. `pip install -e examples/qos-sort-plugin`): use it;
2. `pip install --no-deps --target <tmp>`: a real install of the package as its
   pyproject.toml declares it, into a temporary directory put on sys.path (the
   environment is left untouched). pip builds it in an isolated environment, which
   needs setuptools from an index or pip's cache;
3. when pip cannot build it (offline, no cached setuptools), install it by hand the way an
   editable install does: the source directory on sys.path plus a dist-info whose
   entry_points.txt is generated from the package's pyproject.toml — exactly the
   metadata kopfsched reads through importlib.metadata.

`--no-build-isolation` is no way out: it needs setuptools>=68 and wheel in the test
environment, which `.[test]` does not promise (Python 3.12 venvs have no setuptools),
and a direct `file:` reference in the test extras cannot be relative.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pathlib
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator

import pytest

EXAMPLE = pathlib.Path(__file__).parents[2] / "examples" / "qos-sort-plugin"
DISTRIBUTION = "kopfsched-qos-sort"


@pytest.fixture(scope="session")
def qos_sort_package(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """How the example got installed: "environment", "pip" or "metadata"."""
    if _installed():
        yield "environment"
        return
    site = tmp_path_factory.mktemp("site-packages")
    paths = [str(site)]
    how = "pip" if _pip_install(site) else "metadata"
    if how == "metadata":
        paths.append(_metadata_install(site))
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


def _pip_install(site: pathlib.Path) -> bool:
    # Build from a copy: setuptools leaves build/ and *.egg-info in the tree it builds.
    source = site.parent / "qos-sort-plugin-source"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--disable-pip-version-check",
               "--target", str(site), str(source)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _metadata_install(site: pathlib.Path) -> str:
    """What an editable install leaves behind: dist-info with the declared entry points; returns
    the source root to put on sys.path."""
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    info = site / f"{DISTRIBUTION.replace('-', '_')}-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    lines = []
    for group, points in project.get("entry-points", {}).items():
        lines.append(f"[{group}]")
        lines.extend(f"{name} = {value}" for name, value in points.items())
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return str(EXAMPLE / "src")

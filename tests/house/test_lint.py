"""The house rules, enforced in CI: ruff's style checks, import-linter's layer contracts
(only the kube layer imports kopf/kubernetes_asyncio; plugins see only the framework; ...)
and mypy over operator/ at the strictness stated in pyproject.toml's [tool.mypy]."""

import pathlib
import subprocess
import sys

import pytest

from tests.tools import tool

pytestmark = pytest.mark.timeout(660)  # each tool's run is bounded at 600 s

ROOT = pathlib.Path(__file__).parents[2]


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)


def test_ruff_is_clean():
    result = _run(sys.executable, "-m", "ruff", "check", "operator", "tests")
    assert result.returncode == 0, result.stdout + result.stderr


def test_layers_are_respected():
    result = _run(tool("lint-imports", package="import-linter"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_types_check_clean():
    """mypy reads its settings (packages, strictness) from pyproject.toml."""
    result = _run(tool("mypy", package="mypy"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("Success: no issues found")


def test_the_tested_lower_bounds_are_the_declared_ones():
    """tests/lower_bounds.sh installs exactly the lower bounds pyproject.toml declares."""
    declared = (ROOT / "pyproject.toml").read_text()
    script = (ROOT / "tests" / "lower_bounds.sh").read_text()
    for package, lower in (("kopf", "1.45.0"), ("kubernetes-asyncio", "32.3.2")):
        assert f'"{package}>={lower},' in declared
        assert f'"{package}=={lower}"' in script

"""The house rules, enforced in CI: ruff's style checks and import-linter's layer contracts
(only the kube layer imports kopf/kubernetes_asyncio; plugins see only the framework; ...)."""

import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).parents[1]


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)


def test_ruff_is_clean():
    result = _run(sys.executable, "-m", "ruff", "check", "operator", "tests")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.skipif(shutil.which("lint-imports") is None, reason="import-linter is not installed")
def test_layers_are_respected():
    result = _run(shutil.which("lint-imports") or "lint-imports")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout

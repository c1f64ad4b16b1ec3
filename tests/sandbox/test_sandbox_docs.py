"""The sandbox's commands exactly as the README's quick start and docs/sandbox.md show them:
`kopfsched sandbox` started in a directory of its own (with the repository's examples/ at
hand, as in a clone), then each shown kubectl line run through the shell, unchanged, and
what the README says they do checked (the `report-*` pods are bound once the bin-packing
profile is applied)."""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator

import pytest
import yaml

from tests.sandbox.sandbox_process import ROOT, environment, read_until, sandbox_command

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.DOTALL | re.MULTILINE)


def block_after(doc: str, first_line: str) -> list[str]:
    """The lines of the code block of `doc` that starts with `first_line`."""
    [body] = [body for _, body in FENCE.findall((ROOT / doc).read_text()) if body.startswith(first_line)]
    return body.splitlines()


README_BLOCK = block_after("README.md", "export KUBECONFIG=~/.kube/kopfsched-sandbox.kubeconfig")
SANDBOX_DOC_BLOCK = block_after("docs/sandbox.md", "kubectl --kubeconfig ~/.kube/kopfsched-sandbox.kubeconfig get pods")


@pytest.fixture
def running_sandbox(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[pathlib.Path]:
    """`kopfsched sandbox` as the README runs it (a free metrics port, so parallel runs do not clash)."""
    monkeypatch.setenv('KUBECACHEDIR', str(tmp_path / 'kube-cache'))
    monkeypatch.setenv('HOME', str(tmp_path / 'home'))  # the default kubeconfig goes to ~/.kube/
    (tmp_path / 'examples').symlink_to(ROOT / 'examples')
    process = subprocess.Popen(sandbox_command('--metrics-port', '0'), cwd=tmp_path, env=environment(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        read_until(process, 'Ctrl-C stops it.', timeout=90)
        assert (tmp_path / 'home' / '.kube' / 'kopfsched-sandbox.kubeconfig').is_file(), 'the default --kubeconfig-out'
        assert not (tmp_path / 'kopfsched-sandbox.kubeconfig').exists(), 'nothing written where it was started'
        yield tmp_path
        process.send_signal(signal.SIGTERM)
        err = process.communicate(timeout=60)[1].decode(errors='replace')
        assert process.returncode == 0, err[-3000:]
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def shell(cwd: pathlib.Path, script: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, 'PATH': os.pathsep.join([str(pathlib.Path(shutil.which('kubectl') or 'kubectl').parent),
                                                  os.environ.get('PATH', '')])}
    env.pop('KUBECONFIG', None)
    return subprocess.run(['bash', '-euo', 'pipefail', '-c', script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120, check=False)


def report_nodes(cwd: pathlib.Path) -> list[str]:
    done = shell(cwd, 'kubectl --kubeconfig ~/.kube/kopfsched-sandbox.kubeconfig get pods -n batch -o '
                      '\'jsonpath={range .items[*]}{.metadata.name}={.spec.nodeName}{"\\n"}{end}\'')
    assert done.returncode == 0, done.stderr
    return sorted(line.split('=')[1] for line in done.stdout.splitlines() if line.startswith('report-'))


def test_the_readme_and_sandbox_doc_commands_run_as_shown(running_sandbox: pathlib.Path) -> None:
    cwd = running_sandbox
    assert report_nodes(cwd) == ['', '', ''], 'no profile named bin-packing yet: the report-* pods wait'

    done = shell(cwd, '\n'.join(README_BLOCK))  # one shell: the export holds for the lines after it
    assert done.returncode == 0, done.stderr
    assert 'inference-0' in done.stdout and 'schedulerprofile.kopfsched.dev/bin-packing created' in done.stdout

    deadline = time.monotonic() + 30
    while '' in report_nodes(cwd) and time.monotonic() < deadline:
        time.sleep(0.3)
    assert '' not in report_nodes(cwd), 'the README: "a new profile: the report-* pods get bound"'

    (cwd / 'my-pod.yaml').write_text(yaml.safe_dump({
        'apiVersion': 'v1', 'kind': 'Pod', 'metadata': {'name': 'my-pod'},
        'spec': {'containers': [{'name': 'main', 'image': 'nginx'}]}}))
    for line in SANDBOX_DOC_BLOCK:
        done = shell(cwd, line)
        assert done.returncode == 0, f'{line}\n{done.stderr}'
    assert 'pod/my-pod created' in done.stdout

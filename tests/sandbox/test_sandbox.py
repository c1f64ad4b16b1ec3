"""`kopfsched sandbox` as a user runs it: the command in a process of its own, driven by the real
kubectl through the kubeconfig it writes, stopped with SIGTERM."""
from __future__ import annotations

import json
import pathlib
import re
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator

import pytest
import yaml

from tests.kubectl import kubectl
from tests.sandbox.sandbox_process import environment, read_until, sandbox_command


@pytest.fixture
def sandbox(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, pathlib.Path]]:
    monkeypatch.setenv('KUBECACHEDIR', str(tmp_path / 'kube-cache'))
    process = subprocess.Popen(sandbox_command('--metrics-port', '0', '--kubeconfig-out', 'sandbox.kubeconfig'),
                               cwd=tmp_path, env=environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               bufsize=0)
    try:
        printed = read_until(process, 'Ctrl-C stops it.', timeout=90)
        yield printed, tmp_path / 'sandbox.kubeconfig'
        process.send_signal(signal.SIGTERM)
        err = process.communicate(timeout=60)[1].decode(errors='replace')
        assert process.returncode == 0, err[-3000:]
        assert 'Traceback' not in err, err[-3000:]
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def test_a_kubectl_session_against_the_sandbox(sandbox: tuple[str, pathlib.Path], tmp_path: pathlib.Path) -> None:
    printed, kubeconfig = sandbox
    assert '(24 Nodes, 28 Pods)' in printed
    assert 'kubectl --kubeconfig sandbox.kubeconfig get pods -A -o wide' in printed
    dashboard = re.search(r'dashboard\s+(http://127\.0\.0\.1:\d+/)', printed)
    assert dashboard is not None, printed

    # A pod with no schedulerName, applied as a user would: plain `kubectl apply`, no flags.
    manifest = tmp_path / 'hello.yaml'
    manifest.write_text(yaml.safe_dump({
        'apiVersion': 'v1', 'kind': 'Pod', 'metadata': {'name': 'hello'},
        'spec': {'containers': [{'name': 'main', 'image': 'nginx', 'resources': {'requests': {'cpu': '100m'}}}]}}))
    applied = kubectl(kubeconfig, 'apply', '-f', str(manifest))
    assert (applied.returncode, applied.stdout.strip()) == (0, 'pod/hello created'), applied.stderr
    node = ''
    deadline = time.monotonic() + 30
    while not node and time.monotonic() < deadline:
        node = kubectl(kubeconfig, 'get', 'pod', 'hello', '-o', 'jsonpath={.spec.nodeName}').stdout.strip()
        time.sleep(0.2)
    assert node.startswith(('general-', 'arm-')), node  # untainted, schedulable nodes only

    described = kubectl(kubeconfig, 'describe', 'pod', 'hello')
    assert f'Successfully assigned default/hello to {node}' in described.stdout.split('Events:', 1)[1]

    wide = kubectl(kubeconfig, 'get', 'pods', '-A', '-o', 'wide')
    rows = {tuple(line.split()[:2]): line.split() for line in wide.stdout.splitlines()[1:]}
    assert rows['default', 'hello'][7] == node  # NAMESPACE NAME READY STATUS RESTARTS AGE IP NODE
    assert rows['shop', 'frontend-0'][7] != '<none>'  # the snapshot's pending pods were scheduled too

    with urllib.request.urlopen(f'{dashboard.group(1)}debug/pending', timeout=10) as response:
        pending = {f"{p['namespace']}/{p['name']}": p for p in json.load(response)['pods']}
    assert pending['ml/inference-0']['reasons']['Insufficient nvidia.com/gpu'] == 20
    assert 'default/hello' not in pending

    profiles = kubectl(kubeconfig, 'get', 'schedulerprofiles')
    assert [line.split()[:3] for line in profiles.stdout.splitlines()] == [
        ['NAME', 'SCHEDULER', 'READY'], ['default-scheduler', 'default-scheduler', 'True'],
        ['kopfsched', 'kopfsched', 'True']]

    # The gated pod shows what a real API server gives it.
    gated = kubectl(kubeconfig, 'get', 'pod', '-n', 'batch', 'quota-job-0', '-o',
                    'jsonpath={range .status.conditions[*]}{.type}={.status}/{.reason}/{.message}{end}')
    assert gated.stdout == 'PodScheduled=False/SchedulingGated/Scheduling is blocked due to non-empty scheduling gates'

    # A second sandbox on the same metrics port fails, and leaves this one's kubeconfig alone.
    before = kubeconfig.read_text()
    port = dashboard.group(1).rstrip('/').rsplit(':', 1)[1]
    second = subprocess.run(sandbox_command('--metrics-port', port, '--kubeconfig-out', 'sandbox.kubeconfig'),
                            cwd=tmp_path, env=environment(), capture_output=True, text=True, timeout=120, check=False)
    assert second.returncode == 1, second.stderr[-2000:]
    assert 'Traceback' not in second.stderr
    assert kubeconfig.read_text() == before


def test_the_sandbox_says_why_its_placements_may_differ_from_simulate() -> None:
    from kopfsched.sandbox import usage

    text = " ".join(usage(kubeconfig="k", dashboard="http://127.0.0.1:1/", api="http://127.0.0.1:2",
                          counts={}, example=True).split())
    assert ("Placements may differ from `kopfsched simulate` on the same file: here the API server stamps each "
            "pod's creationTimestamp as the sandbox creates it (file order, not the file's times) and score ties "
            "are broken at random, as kube-scheduler does; simulate queues by the file's creationTimestamp and "
            "breaks ties with --seed.") in text


def test_a_missing_snapshot_is_one_line_and_status_1(tmp_path: pathlib.Path) -> None:
    result = subprocess.run(sandbox_command('missing.yaml'), cwd=tmp_path, env=environment(), capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == 'missing.yaml: cannot read: No such file or directory'
    assert 'Traceback' not in result.stderr

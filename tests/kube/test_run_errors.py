"""`kopfsched run` on user errors: one line on stderr and exit status 1, never a traceback."""
from __future__ import annotations

import pathlib

import pytest

from kopfsched.kube.main import options_from, run_operator

KSC = 'apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n'


def run(capsys: pytest.CaptureFixture[str], *, kubeconfig: str | None = None,
        config_file: str | None = None) -> tuple[int, str]:
    code = run_operator(kubeconfig=kubeconfig, config_file=config_file, leader_elect=False, metrics_port=None)
    return code, capsys.readouterr().err


def test_a_missing_kubeconfig_file_exits_1_naming_it(tmp_path: pathlib.Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / 'nope.yaml'
    code, err = run(capsys, kubeconfig=str(missing))
    assert (code, err.count('\n')) == (1, 1), err
    assert err.startswith(f'kopfsched run: --kubeconfig {missing}: ')
    assert 'No such file or directory' in err


def test_a_kubeconfig_that_is_not_one_exits_1(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / 'kubeconfig'
    broken.write_text('apiVersion: v1\nkind: Config\n')
    code, err = run(capsys, kubeconfig=str(broken))
    assert (code, err.count('\n')) == (1, 1), err
    assert err.startswith(f'kopfsched run: --kubeconfig {broken}: ')


@pytest.mark.parametrize(('connection', 'problem'), [
    pytest.param('5', 'clientConnection: must be an object, got integer', id='not-an-object'),
    pytest.param('{qps: abc}', "clientConnection.qps: must be a number, got 'abc'", id='qps-not-a-number'),
    pytest.param('{qps: -1}', 'clientConnection.qps: must be non-negative, got -1', id='qps-negative'),
    pytest.param('{burst: 1.5}', 'clientConnection.burst: must be an integer, got 1.5', id='burst-not-an-integer'),
    pytest.param('{burst: -2}', 'clientConnection.burst: must be non-negative, got -2', id='burst-negative'),
])
def test_a_malformed_client_connection_exits_1_naming_the_field(
        tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], connection: str, problem: str) -> None:
    config = tmp_path / 'config.yaml'
    config.write_text(f'{KSC}clientConnection: {connection}\n')
    code, err = run(capsys, config_file=str(config))
    assert (code, err) == (1, f'{config}: document 1: KubeSchedulerConfiguration: {problem}\n')


@pytest.mark.parametrize(('section', 'expected'), [
    pytest.param('', ('kopfsched', 'ops', 50.0, 100, True), id='defaults'),
    pytest.param('leaderElection: {leaderElect: false, resourceName: mine, resourceNamespace: here}\n'
                 'clientConnection: {qps: 5, burst: 7}\n', ('mine', 'here', 5.0, 7, False), id='from-the-file'),
])
def test_the_options_come_from_the_config_file_else_the_operator_defaults(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, section: str,
        expected: tuple[str, str, float, int, bool]) -> None:
    monkeypatch.setenv('POD_NAMESPACE', 'ops')
    config = tmp_path / 'config.yaml'
    config.write_text(f'{KSC}{section}')
    options = options_from(kubeconfig=None, config_file=str(config), leader_elect=None, metrics_port=None)
    assert (options.lease.name, options.lease.namespace, options.qps, options.burst, options.leader_elect) == expected

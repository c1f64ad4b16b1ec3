"""The operator on user errors and transient API failures, end to end against the emulator."""
from __future__ import annotations

import pathlib

import pytest

from kopfsched.kube.main import run_operator
from tests.e2e.emulator import FastKubernetesEmulator


def test_an_api_server_that_refuses_the_initial_listing_exits_1(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    """E.g. the ClusterRole was not applied: 403 on the first LIST."""
    emulator.fail_next('GET', r'/schedulerprofiles\?', status=403, message='forbidden by RBAC')
    code = run_operator(kubeconfig=str(kubeconfig), config_file=None, leader_elect=False, metrics_port=None)
    err = capsys.readouterr().err
    assert (code, err.count('\n')) == (1, 1), err
    assert err == 'kopfsched run: listing schedulerprofiles: 403 Forbidden: forbidden by RBAC\n'

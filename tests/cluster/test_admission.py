"""SchedulerProfiles refused at admission by the real kube-apiserver: `kubectl apply` of each
bad profile of tests/config/admission_cases.py fails, and kubectl's error names the field and
says what is wrong; the good ones and a profile only the operator can judge (a plugin that is
not installed) are accepted. Server-side dry runs: the API server validates and stores nothing."""
from __future__ import annotations

import pytest
import yaml

from tests.config.admission_cases import ACCEPTED, REFUSED, Refused, profile
from tests.kubeenv.control_plane import ControlPlane


def apply(cluster: ControlPlane, obj: dict) -> tuple[int, str]:
    done = cluster.kubectl('apply', '--dry-run=server', '-f', '-', input=yaml.safe_dump(obj))
    return done.returncode, done.stderr + done.stdout


@pytest.mark.parametrize('case', REFUSED, ids=lambda case: case.id)
def test_kubectl_apply_of_an_invalid_profile_fails_naming_the_field(cluster: ControlPlane, case: Refused) -> None:
    code, output = apply(cluster, profile(f'bad-{case.id}'[:63], case.spec))
    assert code != 0, output
    assert case.field in output, output
    assert case.api_message in output, output


@pytest.mark.parametrize(('name', 'spec'), ACCEPTED, ids=[name for name, _ in ACCEPTED])
def test_a_valid_profile_is_accepted(cluster: ControlPlane, name: str, spec: dict) -> None:
    code, output = apply(cluster, profile(f'ok-{name}'[:63], spec))
    assert code == 0, output
    assert 'created (server dry run)' in output


def test_what_only_the_operator_knows_is_left_to_the_status(cluster: ControlPlane) -> None:
    """A well-formed name of a plugin that is not installed: the API server cannot know; the
    operator reports it in the profile's status (Ready=False, InvalidConfig)."""
    spec = {'plugins': {'filter': {'enabled': [{'name': 'NotInstalled'}]}}}
    code, output = apply(cluster, profile('not-installed', spec))
    assert code == 0, output

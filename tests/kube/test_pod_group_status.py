"""PodGroupStatusWriter: which PodGroups get a status from us, and when it is written."""
from __future__ import annotations

from typing import Any

import pytest

from kopfsched.config.defaults import default_profile
from kopfsched.framework.client import ClusterError, NotFoundError
from kopfsched.kube.podgroups import PodGroupStatusWriter
from kopfsched.plugins.registry import in_tree_registry
from tests.builders import make_node, make_pod
from tests.harness import Harness, profile_from_spec

GANG_SPEC = {'plugins': {'multiPoint': {'enabled': [{'name': 'Coscheduling'}]},
                         'queueSort': {'disabled': [{'name': 'PrioritySort'}]}}}
GROUP_LABEL = 'scheduling.x-k8s.io/pod-group'


class FakeClient:
    def __init__(self, *, fail_with: ClusterError | None = None) -> None:
        self.patches: list[tuple[str, str, dict[str, Any]]] = []
        self.fail_with = fail_with

    async def patch_pod_group_status(self, *, namespace: str, name: str, status: dict[str, Any]) -> None:
        if self.fail_with is not None:
            raise self.fail_with
        self.patches.append((namespace, name, dict(status)))


def pod_group(name: str, *, min_member: int = 2, status: dict[str, Any] | None = None) -> dict[str, Any]:
    obj = {'apiVersion': 'scheduling.x-k8s.io/v1alpha1', 'kind': 'PodGroup',
           'metadata': {'name': name, 'namespace': 'default', 'uid': f'uid-{name}'},
           'spec': {'minMember': min_member}}
    return {**obj, 'status': status} if status is not None else obj


def member(name: str, group: str, *, scheduler: str = 'gang', node: str | None = 'node-0') -> dict[str, Any]:
    return make_pod(name, scheduler_name=scheduler, labels={GROUP_LABEL: group}, node_name=node,
                    requests={'cpu': '100m'})


def scheduled(count: int) -> dict[str, Any]:
    return {'phase': 'Scheduled', 'scheduled': count, 'running': 0, 'succeeded': 0, 'failed': 0}


def harness(*, groups: list[dict[str, Any]], pods: list[dict[str, Any]]) -> Harness:
    registry = in_tree_registry()
    h = Harness([make_node('node-0')], registry=registry,
                profiles=[profile_from_spec(GANG_SPEC, registry, name='gang'), default_profile(registry)])
    h.add_objects('PodGroup', *groups)
    h.add_pods(*pods)
    return h


@pytest.mark.parametrize(('groups', 'pods', 'expected'), [
    ([pod_group('g')], [member('a', 'g'), member('b', 'g')], [('default', 'g', scheduled(2))]),
    ([pod_group('g')], [member('a', 'g', node=None), member('b', 'g', node=None)],
     [('default', 'g', {'phase': 'PreScheduling', 'scheduled': 0, 'running': 0, 'succeeded': 0, 'failed': 0})]),
    ([pod_group('g')], [member('a', 'g', scheduler='default-scheduler')], []),
    ([pod_group('g')], [member('a', 'g', scheduler='someone-else', node=None)], []),
    ([pod_group('g')], [], []),
    ([pod_group('g', status=scheduled(2))], [member('a', 'g'), member('b', 'g')], []),
    ([pod_group('g', status={**scheduled(1), 'occupiedBy': 'default/job'})], [member('a', 'g'), member('b', 'g')],
     [('default', 'g', scheduled(2))]),
    ([pod_group('g', status={**scheduled(2), 'phase': 'Running', 'running': 2})],
     [member('a', 'g')], []),
    ([pod_group('g', status={**scheduled(0), 'phase': 'PreScheduling'})], [member('a', 'g', node=None)],
     [('default', 'g', {'phase': 'Pending', 'scheduled': 0, 'running': 0, 'succeeded': 0, 'failed': 0})]),
], ids=['bound-gang', 'pending-gang', 'profile-without-coscheduling', 'other-scheduler', 'no-members',
        'status-already-there', 'status-outdated', 'running-members-finished-out-of-sight',
        'pre-scheduling-member-deleted'])
async def test_which_groups_are_written(groups, pods, expected) -> None:
    client = FakeClient()
    writer = PodGroupStatusWriter(scheduler=harness(groups=groups, pods=pods).scheduler, client=client)
    assert await writer.write() == len(expected)
    assert client.patches == expected


async def test_a_status_is_written_again_only_when_it_changes() -> None:
    h = harness(groups=[pod_group('g')], pods=[member('a', 'g')])
    client = FakeClient()
    writer = PodGroupStatusWriter(scheduler=h.scheduler, client=client)
    rounds = [await writer.write(), await writer.write()]
    h.add_pods(member('b', 'g'))
    rounds += [await writer.write(), await writer.write()]
    assert rounds == [1, 0, 1, 0]
    assert [status['phase'] for _, _, status in client.patches] == ['Pending', 'Scheduled']


@pytest.mark.parametrize('error', [NotFoundError('gone'), ClusterError('500')], ids=['not-found', 'server-error'])
async def test_a_failed_write_is_retried_on_the_next_round(error: ClusterError) -> None:
    h = harness(groups=[pod_group('g')], pods=[member('a', 'g'), member('b', 'g')])
    client = FakeClient(fail_with=error)
    writer = PodGroupStatusWriter(scheduler=h.scheduler, client=client)
    assert await writer.write() == 0
    client.fail_with = None
    assert await writer.write() == 1
    assert client.patches == [('default', 'g', scheduled(2))]

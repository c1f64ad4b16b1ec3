"""SchedulerProfiles hot-reload: a valid edit changes placement without a restart, an invalid
one is reported while the last valid spec keeps serving; clashing scheduler names are reported."""
from __future__ import annotations

import pathlib
from typing import Any

import aiohttp
import pytest

from kopfsched.emulator.server import FastKubernetesEmulator
from tests.builders import make_node, make_pod
from tests.e2e.operator_harness import (
    PROFILES,
    eventually,
    node_of,
    patch,
    post,
    profile,
    running_operator,
    scoring_strategy,
)

pytestmark = pytest.mark.http(profiles=())


ROOT = pathlib.Path(__file__).parents[2]
PODS = '/api/v1/namespaces/default/pods'
ONLY_FIT_SCORES = {'score': {'disabled': [{'name': '*'}], 'enabled': [{'name': 'NodeResourcesFit'}]}}


def status_of(emulator: FastKubernetesEmulator, name: str) -> dict[str, Any]:
    return (emulator.get_object('schedulerprofiles', None, name, group='kopfsched.dev') or {}).get('status') or {}


def ready_of(emulator: FastKubernetesEmulator, name: str) -> dict[str, Any]:
    return next(iter(status_of(emulator, name).get('conditions') or ()), {})


async def schedule(http: aiohttp.ClientSession, emulator: FastKubernetesEmulator, name: str) -> str:
    await post(http, PODS, make_pod(name, scheduler_name='packer', requests={'cpu': '1'}))
    return await eventually(lambda: node_of(emulator, name), what=f'{name} bound')


async def test_hot_reload_changes_placement_and_an_invalid_edit_keeps_the_old_spec(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    await post(http, PROFILES, profile('packer', plugins=ONLY_FIT_SCORES,
                                       pluginConfig=[scoring_strategy('LeastAllocated')]))
    await post(http, '/api/v1/nodes', make_node('busy', cpu='4'))
    await post(http, '/api/v1/nodes', make_node('idle', cpu='4'))
    await post(http, PODS, make_pod('running', node_name='busy', requests={'cpu': '2'}))

    async with running_operator(kubeconfig):
        least = await schedule(http, emulator, 'first')  # busy 50%, idle 0%: LeastAllocated spreads

        await patch(http, f'{PROFILES}/packer', {'spec': {'pluginConfig': [scoring_strategy('MostAllocated')]}})
        await eventually(lambda: ready_of(emulator, 'packer').get('observedGeneration') == 2,
                         what='generation 2 observed')
        reloaded = ready_of(emulator, 'packer')
        most = await schedule(http, emulator, 'second')  # busy 50%, idle 25%: MostAllocated packs

        await patch(http, f'{PROFILES}/packer', {'spec': {
            'plugins': {'score': {'enabled': [{'name': 'NoSuchPlugin'}]}},
            'pluginConfig': [{'name': 'NodeResourcesFit', 'args': {'scoringStrategy': {'type': 'Bogus'}}}]}})
        invalid = await eventually(lambda: ready_of(emulator, 'packer').get('observedGeneration') == 3 and
                                   ready_of(emulator, 'packer'), what='generation 3 observed')
        still_most = await schedule(http, emulator, 'third')  # busy 75%, idle 25%: still packing
        served = status_of(emulator, 'packer')

    assert (least, most, still_most) == ('idle', 'busy', 'busy')
    assert (reloaded['status'], reloaded['reason']) == ('True', 'Serving')
    assert (invalid['status'], invalid['reason']) == ('False', 'InvalidConfig')
    assert 'spec.plugins.score.enabled[0].name: unknown plugin "NoSuchPlugin"' in invalid['message']
    assert 'spec.pluginConfig[0].args.scoringStrategy.type' in invalid['message']
    assert invalid['message'].endswith('(generation 2 keeps serving)')
    assert served['observedGeneration'] == 3
    assert served['plugins']['score'] == [{'name': 'NodeResourcesFit', 'weight': 1}]


async def test_a_scheduler_name_defined_twice_is_reported_and_deleting_a_profile_stops_it(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    await post(http, PROFILES, profile('first', scheduler_name='shared'))
    await post(http, '/api/v1/nodes', make_node('node-0'))

    async with running_operator(kubeconfig) as operator:
        await eventually(lambda: ready_of(emulator, 'first').get('status') == 'True', what='first ready')
        await post(http, PROFILES, profile('second', scheduler_name='shared'))
        clash = await eventually(lambda: ready_of(emulator, 'second').get('reason') == 'Conflict' and
                                 ready_of(emulator, 'second'), what='the clash reported')
        first = ready_of(emulator, 'first')

        async with http.delete(f'{PROFILES}/first') as deleted:
            assert deleted.status == 200
        # The second profile now owns the name.
        await eventually(lambda: ready_of(emulator, 'second').get('status') == 'True', what='second serving')
        async with http.delete(f'{PROFILES}/second') as deleted:
            assert deleted.status == 200
        await eventually(lambda: not operator.scheduler.profiles, what='no profile served')
        await post(http, PODS, make_pod('orphan', scheduler_name='shared'))
        await eventually(lambda: 'orphan' in {p.name for p in operator.scheduler.unmanaged},
                         what='the pod seen')

    assert (first['status'], first['reason']) == ('True', 'Serving')
    assert clash['status'] == 'False'
    assert clash['message'] == ('scheduler name "shared" is also used by SchedulerProfile/first (not served)')
    assert node_of(emulator, 'orphan') is None
    assert not emulator.mutations('POST', r'/pods/orphan/binding$')
    assert not emulator.mutations('PATCH', r'/pods/orphan/status$')

"""Each kind is listed once: kopf's LIST fills the cache and says when the operator is ready, and a
relist reconciles what vanished without a LIST of its own (the emulator counts LIST requests, the
pages of one LIST once)."""
from __future__ import annotations

import asyncio
import gc
import pathlib

import aiohttp

from kopfsched.emulator.server import FastKubernetesEmulator
from kopfsched.kube.handlers import PROFILE_KIND, WATCHED
from tests.builders import make_node, make_pod
from tests.e2e.operator_harness import eventually, post, running_operator

PODS = '/api/v1/namespaces/default/pods'


def served_kinds(emulator: FastKubernetesEmulator) -> set[str]:
    """Our watched kinds the emulator serves, named as its LIST counts name them."""
    names = set()
    for watched in (*WATCHED, PROFILE_KIND):
        group, _, version = watched.group_version.rpartition('/')
        if emulator.serves(group, version, watched.plural):
            names.add(f'{watched.plural}.{group}' if group else watched.plural)
    return names


async def test_each_kind_is_listed_once_at_start_up_page_by_page_and_the_cache_holds_every_page(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    for i in range(5):
        await post(http, '/api/v1/nodes', make_node(f'node-{i}'))
        await post(http, PODS, make_pod(f'running-{i}', node_name=f'node-{i}'))
    async with running_operator(kubeconfig, list_page_size=2) as operator:
        nodes, pods = sorted(operator.cache.node_names()), operator.informer.feed.count('Pod')
        lists = emulator.lists()
    ours = served_kinds(emulator)
    assert {'pods', 'nodes', 'schedulerprofiles.kopfsched.dev', 'replicasets.apps'} <= ours
    assert {name: lists.get(name, 0) for name in ours} == dict.fromkeys(ours, 1)
    assert (nodes, pods) == ([f'node-{i}' for i in range(5)], 5)


async def test_a_relist_drops_what_vanished_without_listing_the_kind_again(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    for i in range(3):
        await post(http, '/api/v1/nodes', make_node(f'node-{i}'))
    async with running_operator(kubeconfig) as operator:
        # Ready means listed, not yet watching: the error must reach an open watch.
        await eventually(lambda: emulator.open_watches('nodes') > 0, what='the nodes watch')
        # Gone without a DELETED event; the nodes watch then ends with 410 Expired and kopf relists.
        emulator.remove_unseen('nodes', None, 'node-1')
        emulator.watch_error('nodes', code=410)
        await eventually(lambda: operator.cache.get_node('node-1') is None, what='node-1 forgotten')
        await post(http, '/api/v1/nodes', make_node('node-3'))  # the new watch works
        await eventually(lambda: operator.cache.get_node('node-3'), what='node-3 seen')
        nodes = sorted(operator.cache.node_names())
        lists = emulator.lists()
    assert nodes == ['node-0', 'node-2', 'node-3']
    assert lists['nodes'] == 2  # the start-up LIST and kopf's relist: no reconcile LIST besides


async def test_start_up_waits_for_the_slowest_kind(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    """Ready only once every served kind was listed: here pods, throttled (429, kopf retries after
    Retry-After) while the other kinds are listed at once."""
    await post(http, '/api/v1/nodes', make_node('node-0'))
    await post(http, PODS, make_pod('running', node_name='node-0'))
    emulator.throttle(2.0, method='GET', path_regex=r'^/api/v1/pods\?(?!.*watch=)', retry_after=1)
    async with running_operator(kubeconfig) as operator:
        pods = operator.informer.feed.count('Pod')
        lists = emulator.lists()
    assert pods == 1  # ready only after the pods' LIST, the slowest
    assert lists['pods'] == 1  # the throttled attempts were refused before being served


async def test_a_kind_the_api_does_not_serve_does_not_hold_start_up_back(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    """PodGroups (scheduler-plugins' CRD) are watched once installed, but not waited for."""
    async with running_operator(kubeconfig) as operator:
        ready = operator.ready()
        served = await asyncio.to_thread(served_kinds, emulator)
    assert ready and 'podgroups.scheduling.x-k8s.io' not in served


async def test_what_the_listing_built_is_frozen_out_of_the_gc_while_the_operator_runs(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession) -> None:
    """Full collections stop traversing the cache (gc.freeze); a stopped operator thaws it again, so
    a process that runs operators one after another keeps nothing."""
    await post(http, '/api/v1/nodes', make_node('node-0'))
    async with running_operator(kubeconfig):
        frozen = gc.get_freeze_count()
    assert frozen > 0
    assert gc.get_freeze_count() == 0

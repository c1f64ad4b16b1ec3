"""kopfsched beside kube-scheduler, through the same real kube-apiserver and etcd (not a test).

    python -m benchmarks.side_by_side --workload SchedulingBasic/500Nodes [--pairs 2] [--scale 0.5] [-o json]
    python -m benchmarks.side_by_side --offline [--offline-nodes 500,5000,15000] [--offline-pods 1000] [-o json]

Each run starts a fresh etcd and kube-apiserver of the pinned release (tests/kubeenv), creates
the workload's init objects as scheduler_perf's templates shape them (nodes are API objects
with capacity, no kubelet; init pods are created bound, round-robin over the nodes), then the
scheduler under test: kube-scheduler (`start_scheduler`) or `kopfsched run`, both with leader
election off, upstream's default profile under the name `default-scheduler` and client
QPS/burst 5000. A probe pod bound by it says it is ready; then the measured pods are created
by 30 parallel clients (scheduler_perf's createPodsRapidly), with no client-side rate limit.

One watch on every pod, opened before the scheduler starts, serves both: a pod of the measured
namespace counts as scheduled when an event shows its nodeName set. Throughput is computed as
scheduler_perf's throughputCollector does: a sample per second from the first pod scheduled
on (that first sample skipped), a second with nothing new folded into the next, and the
average and percentiles of those samples. Latency is from a pod's ADDED event to the event
with its nodeName. CPU is utime+stime of /proc/<pid>/stat per measured pod, for the
scheduler, kube-apiserver and etcd, from the first measured pod created to the last one
scheduled and its `Scheduled` Event posted (and, beside it, to the last one scheduled); the
scheduler's peak RSS is VmHWM at the end. The schedulers run alternately, kube-scheduler first
in each pair, never two at once (`--pairs` pairs, ABAB).

`--offline` times the scheduling loop alone on identical snapshots (SchedulingBasic's nodes, as
many bound pods, `--offline-pods` pending): upstream's scheduler (`oracle simulate`,
tests/kubeenv/cmd/oracle: one scheduler.New over a fake clientset, ScheduleOne per pod with
the default percentageOfNodesToScore) against `kopfsched simulate`, as CPU ms per scheduled
pod of each process's scheduling loop, reading the snapshot and building the scheduler
excluded (benchmarks/offline.py).

`--events-ab` alternates kopfsched with the broadcaster's `Scheduled` Event policy and kopfsched
with each Event posted as soon as its bind succeeds, as kube-scheduler does.
Every phase has a deadline and every process is stopped at exit.
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import dataclasses
import json
import math
import os
import pathlib
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any

import aiohttp
import yaml

from benchmarks.e2e_throughput import CPROFILE_MAIN
from tests.kubeenv.control_plane import Component, ControlPlane, Options

ROOT = pathlib.Path(__file__).parents[1]
CREATORS = 30
"""scheduler_perf's createPodsRapidly: 30 pods created in parallel."""
QPS = 5000
"""scheduler_perf's client QPS and burst, for both schedulers."""
SCHEDULER_NAME = 'default-scheduler'
CHURN_INTERVAL = 0.2
"""scheduler_perf's churn op: one pod every intervalMilliseconds: 200."""
EVENTS_WAIT = 60.0
"""Seconds the CPU window waits at most, after the last pod scheduled, for their Scheduled Events."""
PHASE_TIMEOUT = 900.0
"""Seconds any phase (populating, readiness, the measurement) may take at most."""
MANIFESTS = ('00-namespace.yaml', '01-serviceaccount.yaml', '02-clusterrole.yaml', '03-clusterrolebinding.yaml',
             '04-role-leader-election.yaml', '06-flowschema.yaml')
"""kopfsched's install without its Deployment, Service and PodDisruptionBudget: the same for both runs."""
AT_ONCE_MAIN = """
import asyncio, runpy, sys
from kopfsched.scheduler import broadcaster
def record_at_once(self, **event):
    self._spawn(self._client.record_event(**event), "events")
broadcaster.EventBroadcaster.record_later = record_at_once
sys.argv = ['kopfsched', *sys.argv[1:]]
runpy.run_module('kopfsched', run_name='__main__')
"""
"""`kopfsched run` with every Scheduled Event posted at once (upstream's behaviour)."""
AUDIT = bool(os.environ.get('SIDE_BY_SIDE_AUDIT'))
"""Write the API server's audit log and report the requests of every client but the benchmark's."""
CPROFILE = os.environ.get('SIDE_BY_SIDE_CPROFILE')
"""Where to write a cProfile (thread CPU time) of the last kopfsched run's main thread."""


# -- scheduler_perf's templates ------------------------------------------------------------------

def node_default(i: int, labels: dict[str, str] | None = None, name: str | None = None) -> dict[str, Any]:
    """templates/node-default.yaml (4 CPU, 32 Gi, 110 pods, Ready)."""
    name = name or f'scheduler-perf-{i}'
    return {'apiVersion': 'v1', 'kind': 'Node',
            'metadata': {'name': name, 'labels': {'kubernetes.io/hostname': name, **(labels or {})}},
            'spec': {},
            'status': {'capacity': {'pods': '110', 'cpu': '4', 'memory': '32Gi'},
                       'conditions': [{'status': 'True', 'type': 'Ready'}], 'phase': 'Running'}}


def pod(name: str, namespace: str, *, cpu: str = '100m', memory: str = '500Mi', limits: bool = True,
        priority: int | None = None, grace_zero: bool = False, labels: dict[str, str] | None = None,
        port: bool = True, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {'image': 'registry.k8s.io/pause:3.10.2', 'name': 'pause',
                                 'resources': {'requests': {'cpu': cpu, 'memory': memory}}}
    if limits:
        container['resources']['limits'] = {'cpu': cpu, 'memory': memory}
    if port:
        container['ports'] = [{'containerPort': 80}]
    body: dict[str, Any] = {'apiVersion': 'v1', 'kind': 'Pod',
                            'metadata': {'name': name, 'namespace': namespace, 'labels': labels or {}},
                            'spec': {'containers': [container], **spec}}
    if priority is not None:
        body['spec']['priority'] = priority
    if grace_zero:
        body['spec']['terminationGracePeriodSeconds'] = 0
    return body


def pod_default(name: str, namespace: str) -> dict[str, Any]:
    return pod(name, namespace)


def pod_low_priority(name: str, namespace: str) -> dict[str, Any]:
    """templates/pod-low-priority.yaml: 900m, priority unset (0), grace 0."""
    return pod(name, namespace, cpu='900m', grace_zero=True)


def pod_preemptor(name: str, namespace: str) -> dict[str, Any]:
    """default_preemption/templates/pod-high-priority.yaml: 3970m at priority 9999999."""
    return pod(name, namespace, cpu='3970m', priority=9999999, grace_zero=True, port=False)


def pod_high_priority(name: str, namespace: str) -> dict[str, Any]:
    """templates/pod-high-priority.yaml: 3000m at priority 10 (PreemptionAsync's churn)."""
    return pod(name, namespace, cpu='3000m', priority=10)


def pod_high_priority_large_cpu(name: str, namespace: str) -> dict[str, Any]:
    """templates/pod-high-priority-large-cpu.yaml: 9 CPU, fits no node (Unschedulable's churn)."""
    return pod(name, namespace, cpu='9', limits=False, priority=10)


def pod_anti_affinity(name: str, namespace: str) -> dict[str, Any]:
    """templates/pod-with-pod-anti-affinity.yaml."""
    return pod(name, namespace, labels={'color': 'green'}, affinity={'podAntiAffinity': {
        'requiredDuringSchedulingIgnoredDuringExecution': [{
            'labelSelector': {'matchLabels': {'color': 'green'}}, 'topologyKey': 'kubernetes.io/hostname',
            'namespaces': ['sched-1', 'sched-0']}]}})


def pod_topology_spreading(name: str, namespace: str) -> dict[str, Any]:
    """templates/pod-with-topology-spreading.yaml."""
    return pod(name, namespace, labels={'color': 'blue'}, topologySpreadConstraints=[{
        'maxSkew': 5, 'topologyKey': 'topology.kubernetes.io/zone', 'whenUnsatisfiable': 'DoNotSchedule',
        'labelSelector': {'matchLabels': {'color': 'blue'}}}])


def pod_with_claim_template(name: str, namespace: str) -> dict[str, Any]:
    """dra/templates/pod-with-claim-template.yaml."""
    return {'apiVersion': 'v1', 'kind': 'Pod', 'metadata': {'name': name, 'namespace': namespace},
            'spec': {'containers': [{'image': 'registry.k8s.io/pause:3.10.1', 'name': 'pause',
                                     'resources': {'claims': [{'name': 'resource'}]}}],
                     'resourceClaims': [{'name': 'resource', 'resourceClaimTemplateName': 'test-claim-template'}]}}


def dra_objects(nodes: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """dra/templates: one ResourceSlice of 10 devices per node, the DeviceClass, the claim template."""
    yield '/apis/resource.k8s.io/v1/deviceclasses', {
        'apiVersion': 'resource.k8s.io/v1', 'kind': 'DeviceClass', 'metadata': {'name': 'test-class'},
        'spec': {'selectors': [{'cel': {'expression': 'device.driver == "test-driver.cdi.k8s.io"'}}]}}
    yield '/apis/resource.k8s.io/v1/namespaces/test/resourceclaimtemplates', {
        'apiVersion': 'resource.k8s.io/v1', 'kind': 'ResourceClaimTemplate',
        'metadata': {'name': 'test-claim-template', 'namespace': 'test'},
        'spec': {'spec': {'devices': {'requests': [{'name': 'req-0', 'exactly': {'deviceClassName': 'test-class'}}]}}}}
    for i in range(nodes):
        devices = [{'name': f'basic-device-{d}',
                    'attributes': {'driver': {'string': 'xe'}, 'driverVersion': {'version': '1.2.3'},
                                   'resource.k8s.io/pciRoot': {'string': str(d % 2)},
                                   'family': {'string': 'Arc Pro B-Series'}, 'health': {'string': 'Healthy'},
                                   'model': {'string': 'B60'}, 'pciAddress': {'string': f'0000:0{d}:00.0'},
                                   'pciId': {'string': '0xe211'}, 'pciRoot': {'string': f'0{d % 2}'},
                                   'resource.kubernetes.io/pciBusID': {'string': f'0000:0{d}:00.0'},
                                   'resource.kubernetes.io/pciRoot': {'string': f'pci0000:0{d % 2}'},
                                   'sriov': {'bool': True}, 'type': {'string': 'gpu'}},
                    'capacity': {'memory': {'value': '24480Mi'}, 'millicores': {'value': '1k'}}}
                   for d in range(10)]
        yield '/apis/resource.k8s.io/v1/resourceslices', {
            'apiVersion': 'resource.k8s.io/v1', 'kind': 'ResourceSlice', 'metadata': {'name': f'resourceslice-{i}'},
            'spec': {'pool': {'name': f'resourceslice-{i}', 'generation': 1, 'resourceSliceCount': 1},
                     'driver': 'test-driver.cdi.k8s.io', 'nodeName': f'scheduler-perf-dra-{i}', 'devices': devices}}


@dataclasses.dataclass(frozen=True)
class Workload:
    """One scheduler_perf case: its name (test case/workload), its counts and templates."""

    name: str
    nodes: int
    init_pods: int
    measure_pods: int
    measure_pod: Callable[[str, str], dict[str, Any]]
    init_pod: Callable[[str, str], dict[str, Any]] = pod_default
    node: Callable[[int], dict[str, Any]] = node_default
    init_namespace: str = 'init'
    measure_namespace: str = 'measure'
    churn_pod: Callable[[str, str], dict[str, Any]] | None = None
    """scheduler_perf's churn op (mode: create): one such pod every CHURN_INTERVAL while measuring."""
    steady_seconds: float = 0.0
    """createPods with steadyState: keep measure_pods pending, delete each one scheduled and
    create the next, for this many seconds."""
    dra: bool = False

    def scaled(self, factor: float) -> Workload:
        def scale(n: int) -> int:
            return max(1, round(n * factor)) if n else 0
        return dataclasses.replace(self, nodes=max(5, scale(self.nodes)), init_pods=scale(self.init_pods),
                                   measure_pods=self.measure_pods if self.steady_seconds else scale(self.measure_pods))


def zone_node(i: int) -> dict[str, Any]:
    """TopologySpreading's labelNodePrepareStrategy: zone moon-1/2/3 (here round-robin)."""
    return node_default(i, {'topology.kubernetes.io/zone': f'moon-{i % 3 + 1}'})


def dra_node(i: int) -> dict[str, Any]:
    """dra/templates/node-with-dra-test-driver.yaml."""
    return node_default(i, {'node-with-dra': 'true'}, name=f'scheduler-perf-dra-{i}')


WORKLOADS = {w.name: w for w in (
    Workload('SchedulingBasic/500Nodes', 500, 500, 1000, pod_default),
    Workload('SchedulingBasic/5000Nodes', 5000, 1000, 1000, pod_default),
    Workload('SchedulingPodAntiAffinity/500Nodes', 500, 100, 400, pod_anti_affinity, init_pod=pod_anti_affinity,
             init_namespace='sched-0', measure_namespace='sched-1'),
    Workload('TopologySpreading/500Nodes', 500, 1000, 1000, pod_topology_spreading, node=zone_node),
    Workload('PreemptionBasic/1000Nodes', 1000, 4000, 1000, pod_preemptor, init_pod=pod_low_priority),
    Workload('PreemptionAsync/500Nodes', 500, 2000, 500, pod_default, init_pod=pod_low_priority,
             churn_pod=pod_high_priority),
    Workload('Unschedulable/500Nodes/10Init/1kPods', 500, 10, 1000, pod_default,
             churn_pod=pod_high_priority_large_cpu),
    Workload('SchedulingWithResourceClaimTemplate/empty_500nodes', 500, 0, 10, pod_with_claim_template,
             node=dra_node, measure_namespace='test', steady_seconds=10.0, dra=True),
)}


# -- the API, as a plain aiohttp client ----------------------------------------------------------

def admin_session(cluster: ControlPlane, *, limit: int = CREATORS) -> aiohttp.ClientSession:
    context = ssl.create_default_context(cafile=str(cluster.ca_file))
    context.load_cert_chain(str(cluster.admin.cert), str(cluster.admin.key))
    return aiohttp.ClientSession(cluster.url, connector=aiohttp.TCPConnector(ssl=context, limit=limit))


async def create_all(http: aiohttp.ClientSession, items: Iterable[tuple[str, dict[str, Any]]], *,
                     deadline: float, created: Callable[[str], None] | None = None) -> int:
    """POST every (path, body) with CREATORS concurrent clients; the number created."""
    pending = iter(items)
    count = 0

    async def creator() -> None:
        nonlocal count
        for path, body in pending:
            for attempt in range(10):
                if time.monotonic() > deadline:
                    raise TimeoutError(f'creating {path}: past the deadline after {count}')
                async with http.post(path, json=body) as response:
                    if response.status in (200, 201):
                        count += 1
                        if created is not None:
                            created(body['metadata']['name'])
                        break
                    if response.status != 429 and response.status < 500:
                        raise RuntimeError(f'POST {path}: {response.status} {await response.text()}')
                await asyncio.sleep(0.05 * (attempt + 1))
            else:
                raise RuntimeError(f'POST {path}: still refused after 10 attempts')
    await asyncio.gather(*(creator() for _ in range(CREATORS)))
    return count


def pods_path(namespace: str) -> str:
    return f'/api/v1/namespaces/{namespace}/pods'


class PodWatch:
    """One watch on every pod: when each pod of `namespace` was first seen and first seen bound."""

    def __init__(self, http: aiohttp.ClientSession, namespace: str, resource_version: str) -> None:
        self.http, self.namespace, self.resource_version = http, namespace, resource_version
        self.added: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.on_bound: Callable[[str], None] | None = None
        self.probe_bound = asyncio.Event()

    async def run(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            params = {'watch': '1', 'allowWatchBookmarks': 'true', 'timeoutSeconds': '300',
                      'resourceVersion': self.resource_version}
            async with self.http.get('/api/v1/pods', params=params,
                                     timeout=aiohttp.ClientTimeout(total=None, sock_read=400)) as response:
                if response.status != 200:
                    raise RuntimeError(f'watch pods: {response.status} {await response.text()}')
                async for line in _lines(response):
                    self._event(json.loads(line))

    def _event(self, event: dict[str, Any]) -> None:
        obj = event['object']
        metadata = obj.get('metadata', {})
        if 'resourceVersion' in metadata:
            self.resource_version = metadata['resourceVersion']
        if event['type'] not in ('ADDED', 'MODIFIED'):
            if event['type'] == 'ERROR':
                raise RuntimeError(f'watch pods: {obj}')
            return
        namespace, name = metadata.get('namespace'), metadata['name']
        now = time.monotonic()
        if namespace == 'probe' and obj['spec'].get('nodeName'):
            self.probe_bound.set()
        if namespace != self.namespace:
            return
        self.added.setdefault(name, now)
        if obj['spec'].get('nodeName') and name not in self.bound:
            self.bound[name] = now
            if self.on_bound is not None:
                self.on_bound(name)


async def _lines(response: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    async for line in response.content:
        if line.strip():
            yield line


# -- processes -----------------------------------------------------------------------------------

def cpu_seconds(pid: int) -> float:
    """utime + stime of the process (every thread), in seconds."""
    fields = pathlib.Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def peak_rss_mib(pid: int) -> float:
    for line in pathlib.Path(f'/proc/{pid}/status').read_text().splitlines():
        if line.startswith('VmHWM:'):
            return int(line.split()[1]) / 1024
    return 0.0


def scheduler_config() -> dict[str, Any]:
    """The same KubeSchedulerConfiguration for both: the default profile as default-scheduler."""
    return {'apiVersion': 'kubescheduler.config.k8s.io/v1', 'kind': 'KubeSchedulerConfiguration',
            'leaderElection': {'leaderElect': False},
            'clientConnection': {'qps': QPS, 'burst': QPS},
            'profiles': [{'schedulerName': SCHEDULER_NAME}]}


def start_kopfsched(cluster: ControlPlane, workdir: pathlib.Path, *, events: str) -> Component:
    kubeconfig = cluster.kubeconfig_for_service_account('kopfsched-system', 'kopfsched')
    config = workdir / 'kopfsched-config.yaml'
    config.write_text(yaml.safe_dump(scheduler_config()))
    args = ['run', f'--kubeconfig={kubeconfig}', f'--config={config}', '--no-leader-elect',
            '--metrics-port=0', '--secure-port=0']
    if CPROFILE:
        argv = [sys.executable, '-c', CPROFILE_MAIN, CPROFILE, *args]
    elif events == 'at-once':
        argv = [sys.executable, '-c', AT_ONCE_MAIN, *args]
    else:
        argv = [sys.executable, '-m', 'kopfsched', *args]
    component = Component(name='kopfsched', argv=argv, log=workdir / 'kopfsched.log')
    cluster.components['kopfsched'] = component
    component.start()
    return component


# -- one run -------------------------------------------------------------------------------------

def throughput_samples(start: float, bound: list[float]) -> list[float]:
    """scheduler_perf's throughputCollector over the bound times: a tick per second from `start`;
    the first tick with a pod scheduled only starts the clock; a tick with none new is folded
    into the next (its samples repeated); the last partial second is left out."""
    bound = sorted(bound)
    samples: list[float] = []
    last_count, last_tick, skipped, started = 0, start, 0, False
    index, tick = 0, start + 1.0
    while bound and tick <= bound[-1] + 1e-9:
        while index < len(bound) and bound[index] <= tick:
            index += 1
        if index:
            if not started:
                started, last_count, last_tick = True, index, tick
            elif index == last_count:
                skipped += 1
            else:
                rate = (index - last_count) / (tick - last_tick)
                samples.extend([rate] * (skipped + 1))
                last_count, last_tick, skipped = index, tick, 0
        tick += 1.0
    return samples


def percentile(values: list[float], p: int) -> float:
    """scheduler_perf's: the sorted sample at ceil(n*p/100)-1."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(len(ordered) * p / 100) - 1)] if ordered else 0.0


async def run_once(workload: Workload, scheduler: str, *, events: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix='side-by-side-') as tmp:
        workdir = pathlib.Path(tmp)
        controllers = ('resourceclaim-controller', 'garbage-collector-controller') if workload.dra else ()
        options = Options(audit=AUDIT, kwok=False, controllers=controllers, apiserver_flags={
            # As scheduler_perf's test server: no ServiceAccount controller runs, priorities are set
            # in the pods' specs, and no node-lifecycle controller lifts the not-ready taint.
            'disable-admission-plugins': 'ServiceAccount,TaintNodesByCondition,Priority'})
        with ControlPlane(workdir, options=options) as cluster:
            return await _measure(cluster, workdir, workload, scheduler, events)


async def _measure(cluster: ControlPlane, workdir: pathlib.Path, workload: Workload, scheduler: str,
                   events: str) -> dict[str, Any]:
    applied = cluster.kubectl('apply', '-f', str(ROOT / 'crds'),
                              *(f'-f={ROOT / "manifests" / name}' for name in MANIFESTS))
    if applied.returncode != 0:
        raise RuntimeError(f'kubectl apply: {applied.stderr}')
    for namespace in {'probe', 'churn', workload.init_namespace, workload.measure_namespace}:
        cluster.post('/api/v1/namespaces', {'apiVersion': 'v1', 'kind': 'Namespace', 'metadata': {'name': namespace}})
    figures: dict[str, Any] = {'scheduler': scheduler}
    async with admin_session(cluster) as http, admin_session(cluster, limit=4) as watch_http:
        deadline = time.monotonic() + PHASE_TIMEOUT
        await create_all(http, (('/api/v1/nodes', workload.node(i)) for i in range(workload.nodes)), deadline=deadline)
        if workload.dra:
            await create_all(http, dra_objects(workload.nodes), deadline=deadline)
        init = ((pods_path(workload.init_namespace),
                 {**(body := workload.init_pod(f'init-{i}', workload.init_namespace)),
                  'spec': {**body['spec'], 'nodeName': workload.node(i % workload.nodes)['metadata']['name']}})
                for i in range(workload.init_pods))
        await create_all(http, init, deadline=deadline)
        listed = cluster.get('/api/v1/pods?limit=1')
        watch = PodWatch(watch_http, workload.measure_namespace, listed['metadata']['resourceVersion'])
        watcher = asyncio.create_task(watch.run(time.monotonic() + 2 * PHASE_TIMEOUT))
        started = time.monotonic()
        if scheduler == 'kube-scheduler':
            process = cluster.start_scheduler(scheduler_config())
        else:
            process = start_kopfsched(cluster, workdir, events=events)
        assert process.process is not None
        pid = process.process.pid
        churn: asyncio.Task[None] | None = None
        try:
            cluster.post(pods_path('probe'), pod('probe', 'probe', cpu='0', memory='0', limits=False))
            while not watch.probe_bound.is_set():
                if time.monotonic() - started > PHASE_TIMEOUT or watcher.done():
                    raise RuntimeError(f'{scheduler} never bound the probe pod:\n{process.last_lines()}')
                if not process.alive():
                    raise RuntimeError(f'{scheduler} exited:\n{process.last_lines()}')
                await asyncio.sleep(0.05)
            figures['ready_s'] = round(time.monotonic() - started, 1)
            pids = {'scheduler': pid, 'kube-apiserver': cluster.components['kube-apiserver'].process.pid,
                    'etcd': cluster.components['etcd'].process.pid}
            before = {name: cpu_seconds(p) for name, p in pids.items()}
            first = time.monotonic()
            if workload.churn_pod is not None:
                churn = asyncio.create_task(_churn(http, workload.churn_pod, until=first + PHASE_TIMEOUT))
            if workload.steady_seconds:
                scheduled = await _steady_state(http, watch, workload, until=first + workload.steady_seconds)
                end = first + workload.steady_seconds
            else:
                await create_all(http, ((pods_path(workload.measure_namespace),
                                         workload.measure_pod(f'pod-{i}', workload.measure_namespace))
                                        for i in range(workload.measure_pods)), deadline=first + PHASE_TIMEOUT)
                progress = time.monotonic() + 10
                while len(watch.bound) < workload.measure_pods and time.monotonic() < first + PHASE_TIMEOUT:
                    if watcher.done():
                        watcher.result()
                        raise RuntimeError('the watch ended')
                    if not process.alive():
                        raise RuntimeError(f'{scheduler} exited:\n{process.last_lines()}')
                    if time.monotonic() > progress:
                        progress += 10
                        print(f'  {len(watch.bound)} of {workload.measure_pods} scheduled '
                              f'({len(watch.added)} seen)', file=sys.stderr, flush=True)
                    await asyncio.sleep(0.02)
                scheduled = len(watch.bound)
                end = max(watch.bound.values()) if watch.bound else time.monotonic()
            at_last_bind = {name: cpu_seconds(p) for name, p in pids.items()}
            # A scheduler may post its Scheduled Events after the binds: the CPU is counted
            # until there is one per pod scheduled (or EVENTS_WAIT seconds have passed).
            figures['events_after_s'] = await _wait_for_events(http, workload.measure_namespace, scheduled)
            after = {name: cpu_seconds(p) for name, p in pids.items()}
            figures['peak_rss_mib'] = round(peak_rss_mib(pid), 1)
            if AUDIT:  # what the scheduler asked of the API server, most first
                asked = collections.Counter(_request_kind(e) for e in cluster.audit()
                                            if e['user']['username'] != 'kubeenv-admin')
                figures['requests'] = dict(asked.most_common(12))
        finally:
            if churn is not None:
                churn.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await churn
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watcher
            process.stop()
    bound = list(watch.bound.values())
    samples = throughput_samples(first, bound)
    latencies = [watch.bound[name] - watch.added.get(name, watch.bound[name]) for name in watch.bound]
    figures.update({
        'scheduled': scheduled, 'complete': workload.steady_seconds > 0 or scheduled == workload.measure_pods,
        'seconds': round(end - first, 2),
        'pods_per_second': {'average': round(statistics.fmean(samples), 1) if samples else 0.0,
                            **{f'p{p}': round(percentile(samples, p), 1) for p in (50, 90, 99)},
                            'samples': len(samples)},
        'latency_ms': {f'p{p}': round(1000 * percentile(latencies, p), 1) for p in (50, 90, 99)},
        'cpu_ms_per_pod': {name: round(1000 * (after[name] - before[name]) / max(1, scheduled), 3)
                           for name in pids},
        # Without the time to the Events: with churn, whatever runs longer also schedules more churn pods.
        'cpu_ms_per_pod_to_last_bind': {
            name: round(1000 * (at_last_bind[name] - before[name]) / max(1, scheduled), 3) for name in pids},
    })
    if workload.churn_pod is not None:
        figures['churn_note'] = f'a churn pod every {CHURN_INTERVAL:g} s, not counted'
    return figures


def _request_kind(entry: dict[str, Any]) -> str:
    ref = entry.get('objectRef') or {}
    return f"{entry['verb']} {ref.get('resource')}{'/' + ref['subresource'] if ref.get('subresource') else ''}"


async def _wait_for_events(http: aiohttp.ClientSession, namespace: str, count: int) -> float | None:
    """Seconds until `namespace` holds `count` Events (a list's remainingItemCount, which a
    selector would switch off; in these workloads nearly all are Scheduled); None if it did not
    within EVENTS_WAIT."""
    started = time.monotonic()
    path = f'/api/v1/namespaces/{namespace}/events'
    while time.monotonic() - started < EVENTS_WAIT:
        async with http.get(path, params={'limit': '1'}) as response:
            listed = await response.json()
        present = len(listed.get('items') or ()) + int(listed['metadata'].get('remainingItemCount') or 0)
        if present >= count:
            return round(time.monotonic() - started, 2)
        await asyncio.sleep(0.25)
    return None


async def _churn(http: aiohttp.ClientSession, template: Callable[[str, str], dict[str, Any]], *,
                 until: float) -> None:
    for i in range(int(PHASE_TIMEOUT / CHURN_INTERVAL) + 1):
        if time.monotonic() > until:
            return
        async with http.post(pods_path('churn'), json=template(f'churn-{i}', 'churn')) as response:
            await response.read()
        await asyncio.sleep(CHURN_INTERVAL)


async def _steady_state(http: aiohttp.ClientSession, watch: PodWatch, workload: Workload, *, until: float) -> int:
    """createPodsSteadily: measure_pods created; each one seen scheduled is deleted (grace 0,
    background) and the next created, until `until`; the number scheduled."""
    namespace = workload.measure_namespace
    done: asyncio.Queue[str] = asyncio.Queue()
    watch.on_bound = done.put_nowait
    counter = workload.measure_pods
    await create_all(http, ((pods_path(namespace), workload.measure_pod(f'pod-{i}', namespace))
                            for i in range(workload.measure_pods)), deadline=until + PHASE_TIMEOUT)
    while (left := until - time.monotonic()) > 0:
        try:
            name = await asyncio.wait_for(done.get(), timeout=left)
        except TimeoutError:
            break
        async with http.delete(f'{pods_path(namespace)}/{name}',
                               json={'gracePeriodSeconds': 0, 'propagationPolicy': 'Background'}) as response:
            await response.read()
        async with http.post(pods_path(namespace), json=workload.measure_pod(f'pod-{counter}', namespace)) as response:
            await response.read()
        counter += 1
    watch.on_bound = None
    return sum(1 for t in watch.bound.values() if t <= until)


# -- the comparison ------------------------------------------------------------------------------

def load_average() -> str:
    return subprocess.run(['uptime'], capture_output=True, text=True, check=False).stdout.strip()


Contender = tuple[str, str, str]
"""(label, scheduler: kube-scheduler or kopfsched, kopfsched's Scheduled Event policy)."""
SIDE_BY_SIDE: tuple[Contender, Contender] = (('kube-scheduler', 'kube-scheduler', ''),
                                             ('kopfsched', 'kopfsched', 'deferred'))
EVENTS_AB: tuple[Contender, Contender] = (('kopfsched, Events deferred', 'kopfsched', 'deferred'),
                                          ('kopfsched, Events at once', 'kopfsched', 'at-once'))


async def compare(workload: Workload, *, pairs: int, contenders: tuple[Contender, Contender],
                  log: Callable[[str], None]) -> dict[str, Any]:
    """`pairs` ABAB pairs of the two contenders; the medians of each and B's over A's."""
    runs: list[dict[str, Any]] = []
    for pair in range(pairs):
        for label, scheduler, events in contenders:
            log(f'{workload.name}: pair {pair + 1}/{pairs}, {label} ({load_average()})')
            figures = await run_once(workload, scheduler, events=events)
            figures['scheduler'] = label
            log(f'  {json.dumps(figures)}')
            runs.append(figures)
    labels = [label for label, _, _ in contenders]
    summary = {label: _median(r for r in runs if r['scheduler'] == label) for label in labels}

    def ratio(get: Callable[[dict[str, Any]], float]) -> float | None:
        base = get(summary[labels[0]])
        return round(get(summary[labels[1]]) / base, 2) if base else None
    return {'workload': workload.name, 'nodes': workload.nodes, 'init_pods': workload.init_pods,
            'measure_pods': workload.measure_pods, 'runs': runs, 'median': summary,
            'ratio': {'of': f'{labels[1]} / {labels[0]}',
                      'pods_per_second': ratio(lambda s: s['pods_per_second']['average']),
                      'latency_p99': ratio(lambda s: s['latency_ms']['p99']),
                      'cpu_per_pod_scheduler': ratio(lambda s: s['cpu_ms_per_pod']['scheduler']),
                      'cpu_per_pod_kube_apiserver': ratio(lambda s: s['cpu_ms_per_pod']['kube-apiserver']),
                      'cpu_per_pod_etcd': ratio(lambda s: s['cpu_ms_per_pod']['etcd']),
                      'peak_rss': ratio(lambda s: s['peak_rss_mib'])},
            'load': load_average()}


def _median(runs: Iterable[dict[str, Any]]) -> dict[str, Any]:
    runs = list(runs)

    def med(get: Callable[[dict[str, Any]], float]) -> float:
        return round(statistics.median(get(r) for r in runs), 3)
    return {'pods_per_second': {k: med(lambda r, k=k: r['pods_per_second'][k])
                                for k in ('average', 'p50', 'p90', 'p99')},
            'latency_ms': {k: med(lambda r, k=k: r['latency_ms'][k]) for k in ('p50', 'p90', 'p99')},
            'cpu_ms_per_pod': {k: med(lambda r, k=k: r['cpu_ms_per_pod'][k])
                               for k in ('scheduler', 'kube-apiserver', 'etcd')},
            'cpu_ms_per_pod_to_last_bind': {k: med(lambda r, k=k: r['cpu_ms_per_pod_to_last_bind'][k])
                                            for k in ('scheduler', 'kube-apiserver', 'etcd')},
            'events_after_s': med(lambda r: EVENTS_WAIT if r['events_after_s'] is None else r['events_after_s']),
            'peak_rss_mib': med(lambda r: r['peak_rss_mib']),
            'complete': all(r['complete'] for r in runs)}


# -- offline: the algorithm alone ----------------------------------------------------------------

def snapshot(path: pathlib.Path, nodes: int, running: int, pending: int) -> None:
    """SchedulingBasic's shapes as a `kopfsched simulate` snapshot: bound pods round-robin, then
    pending ones."""
    docs: list[dict[str, Any]] = [node_default(i) for i in range(nodes)]
    for i in range(running):
        body = pod_default(f'init-{i}', 'init')
        body['spec']['nodeName'] = f'scheduler-perf-{i % nodes}'
        body['status'] = {'phase': 'Running'}
        docs.append(body)
    for i in range(pending):
        body = pod_default(f'pod-{i}', 'measure')
        body['metadata']['creationTimestamp'] = f'2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}Z'
        body['status'] = {'phase': 'Pending'}
        docs.append(body)
    for node in docs[:nodes]:
        node['status']['allocatable'] = dict(node['status']['capacity'])
    path.write_text(json.dumps({'apiVersion': 'v1', 'kind': 'List', 'items': docs}))


def offline(sizes: list[int], *, pending: int, runs: int, log: Callable[[str], None]) -> list[dict[str, Any]]:
    """Per size, one snapshot (SchedulingBasic's nodes, as many bound pods, `pending` pods to
    place) through `kopfsched simulate` and `oracle simulate` alternately, `runs` times each:
    CPU ms per scheduled pod of each scheduling loop, set-up excluded; the median run."""
    from benchmarks.offline import kopfsched_simulate, oracle_simulate
    from tests.differential.oracle import build_oracle
    oracle = build_oracle()
    rows = []
    with tempfile.TemporaryDirectory(prefix='side-by-side-offline-') as tmp:
        for nodes in sizes:
            path = pathlib.Path(tmp, f'{nodes}.json')
            snapshot(path, nodes, nodes, pending)
            samples: dict[str, list[dict[str, Any]]] = {'kopfsched': [], 'upstream': []}
            for _ in range(runs):
                k = kopfsched_simulate([path], timeout=PHASE_TIMEOUT)
                samples['kopfsched'].append({
                    'scheduled': k['summary']['scheduled'], 'load_cpu_s': k['measure']['load_cpu_s'],
                    'cpu_s': k['measure']['loop_cpu_s'], 'seconds': k['measure']['loop_s'],
                    'cpu_ms_per_pod': round(1000 * k['measure']['loop_cpu_s'] / max(k['summary']['scheduled'], 1), 3)})
                log(f'offline {nodes} nodes, kopfsched: {samples["kopfsched"][-1]}')
                o = oracle_simulate(oracle, [path], timeout=PHASE_TIMEOUT)['summary']
                samples['upstream'].append({
                    'scheduled': o['scheduled'], 'cpu_s': round(o['cpuSeconds'], 3), 'seconds': round(o['seconds'], 3),
                    'cpu_ms_per_pod': round(o['cpuMsPerScheduledPod'], 3)})
                log(f'offline {nodes} nodes, upstream: {samples["upstream"][-1]}')
            row: dict[str, Any] = {'nodes': nodes, 'running_pods': nodes, 'pending_pods': pending, 'runs': runs}
            for name, got in samples.items():
                row[name] = sorted(got, key=lambda r: r['cpu_ms_per_pod'])[len(got) // 2]
                row[name]['cpu_ms_per_pod_all'] = [r['cpu_ms_per_pod'] for r in got]
            row['ratio_kopfsched_over_upstream'] = round(row['kopfsched']['cpu_ms_per_pod']
                                                         / row['upstream']['cpu_ms_per_pod'], 3)
            rows.append(row)
    return rows


# -- the command line ----------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    def shape(w: Workload) -> str:
        measured = (f'{w.measure_pods} pods kept pending for {w.steady_seconds:g} s' if w.steady_seconds
                    else f'{w.measure_pods} measured pods')
        return f'{w.nodes} nodes, {w.init_pods} init pods, {measured}' + (', churn' if w.churn_pod else '')
    listing = '\n'.join(f'  {w.name:52} {shape(w)}' for w in WORKLOADS.values())
    parser = argparse.ArgumentParser(
        prog='python -m benchmarks.side_by_side', description=__doc__.split('\n\n')[0],
        epilog=f'workloads (scheduler_perf test case/workload):\n{listing}',
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--workload', action='append', metavar='NAME',
                        help='a workload above, or a prefix of one (repeatable; default: all)')
    parser.add_argument('--pairs', type=int, default=2, help='ABAB pairs per workload (default: 2)')
    parser.add_argument('--scale', type=float, default=1.0,
                        help='multiply node and pod counts (at least 5 nodes), for a quick run (default: 1)')
    parser.add_argument('--events-ab', action='store_true',
                        help="alternate kopfsched with its Scheduled Events deferred (the broadcaster's policy) "
                             'and kopfsched with each posted at once, instead of kube-scheduler and kopfsched')
    parser.add_argument('--offline', action='store_true',
                        help="time upstream's scheduler (oracle simulate) against kopfsched simulate on identical "
                             'snapshots instead (no API server)')
    parser.add_argument('--offline-nodes', default='500,5000,15000', help='node counts of --offline')
    parser.add_argument('--offline-pods', type=int, default=1000, help='pending pods of --offline (default: 1000)')
    parser.add_argument('--offline-runs', type=int, default=1,
                        help='runs of each scheduler per size, alternately; the median is reported (default: 1)')
    parser.add_argument('-o', '--output', choices=('table', 'json'), default='table')
    args = parser.parse_args(argv)

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    # A SIGTERM (timeout(1), a CI job's end) unwinds like Ctrl-C: every process is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    if args.pairs < 1 or args.pairs > 10:
        parser.exit(1, 'side_by_side: --pairs must be 1 to 10\n')
    if not 0 < args.scale <= 1:
        parser.exit(1, 'side_by_side: --scale must be in (0, 1]\n')
    if args.offline:
        try:
            sizes = [int(n) for n in args.offline_nodes.split(',')]
        except ValueError:
            parser.exit(1, f'side_by_side: --offline-nodes wants integers, not {args.offline_nodes!r}\n')
        if args.offline_pods < 1 or not 1 <= args.offline_runs <= 10:
            parser.exit(1, 'side_by_side: --offline-pods must be positive and --offline-runs 1 to 10\n')
        rows = offline(sizes, pending=args.offline_pods, runs=args.offline_runs, log=log)
        print(json.dumps(rows, indent=1) if args.output == 'json' else _offline_table(rows))
        return 0
    chosen = []
    for wanted in args.workload or list(WORKLOADS):
        matches = [w for name, w in WORKLOADS.items() if name == wanted or name.startswith(wanted)]
        if not matches:
            parser.exit(1, f'side_by_side: no workload {wanted!r} (see --help)\n')
        chosen.extend(m for m in matches if m not in chosen)
    contenders = EVENTS_AB if args.events_ab else SIDE_BY_SIDE
    results = [asyncio.run(compare(w.scaled(args.scale), pairs=args.pairs, contenders=contenders, log=log))
               for w in chosen]
    print(json.dumps(results, indent=1) if args.output == 'json' else _table(results))
    return 0


def _table(results: list[dict[str, Any]]) -> str:
    lines = [f'{"workload":52} {"scheduler":15} {"pods/s avg/p50/p90/p99":24} {"latency ms p50/p99":19} '
             f'{"CPU ms/pod sched/apiserver/etcd":32} {"RSS MiB":8}']
    for result in results:
        for name, s in result['median'].items():
            pps, lat, cpu = s['pods_per_second'], s['latency_ms'], s['cpu_ms_per_pod']
            lines.append(f'{result["workload"]:52} {name:15} '
                         f'{pps["average"]:.0f}/{pps["p50"]:.0f}/{pps["p90"]:.0f}/{pps["p99"]:.0f}'.ljust(93)
                         + f'{lat["p50"]:.0f}/{lat["p99"]:.0f}'.ljust(20)
                         + f'{cpu["scheduler"]:.2f}/{cpu["kube-apiserver"]:.2f}/{cpu["etcd"]:.2f}'.ljust(33)
                         + f'{s["peak_rss_mib"]:.0f}' + ('' if s['complete'] else '  (incomplete)'))
        lines.append(f'{"":52} ratio {json.dumps(result["ratio"])}')
    return '\n'.join(lines)


def _offline_table(rows: list[dict[str, Any]]) -> str:
    lines = [f'{"nodes":>6} {"pods":>5} {"kopfsched CPU ms/pod":>21} {"upstream CPU ms/pod":>20} {"ratio":>6}']
    lines += [f'{r["nodes"]:>6} {r["pending_pods"]:>5} {r["kopfsched"]["cpu_ms_per_pod"]:>21} '
              f'{r["upstream"]["cpu_ms_per_pod"]:>20} {r["ratio_kopfsched_over_upstream"]:>6}' for r in rows]
    return '\n'.join(lines)


if __name__ == '__main__':
    sys.exit(main())

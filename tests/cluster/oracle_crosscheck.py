"""The oracle itself checked against the real kube-scheduler of the release it runs
(tests/cluster/test_oracle_crosscheck.py): a random cluster of tests/differential's generator
is created in the real API server (kwok as the nodes' kubelets), its pending pods are scheduled
by the real kube-scheduler one at a time in the oracle's queue order, and each outcome is
compared with `oracle run` over a snapshot read back from that same server.

What the real server cannot hold as drawn is changed, the same on both sides (the snapshot is
read back from the server, so the oracle sees what kube-scheduler sees):

- Namespaces, nodes and PVs are renamed per example (`x3-default`, `x3-node-0`): examples
  share one control plane, and what an earlier one leaves terminating is never on a node of
  a later one.
- Priorities: Priority admission refuses a pod with `spec.priority` or a `preemptionPolicy`
  other than its class's, so every pod names a PriorityClass of its (priority, policy): the
  generator's three classes and three more of the same values (`prio-0`, `prio-0-never`,
  `prio-100-never`).
- An extended resource's request gets an equal limit (the server requires one; the
  scheduler reads requests).
- An image name has one size on every node (the first node's drawn size). kube-scheduler's
  cache keeps one summary per image name, sized by whichever node entered it first
  (cache.addNodeImageStates), and kwok's node updates reorder that: with sizes that differ
  per node, ImageLocality's score depends on the order of events (seen: 0 against the
  oracle's 19, which takes the first node of its list).
- Status: the server drops a created object's status. Running pods are made Running by kwok,
  then their drawn `startTime` is written to the status subresource (preemption orders its
  victims by it); a pending pod's drawn `nominatedNodeName` is written the same way before it
  is released; a PDB's drawn status likewise (no disruption controller runs to recompute it);
  a PVC drawn Bound is made Bound by the real PV controller from the PV's claimRef.
- Pending pods are created at once, held by a scheduling gate of the test's (removed from the
  snapshot), and released one at a time: a nominated pending pod holds its room for the pods
  before it on both sides. In the snapshot their creationTimestamp is the drawn one (queue
  order and the oracle's start-time rule; kube-scheduler reads neither for them).
- No provisioner exists for `csi.example.com`: a tiny one in the test makes the PV when
  kube-scheduler has chosen the node of a WaitForFirstConsumer claim (the selected-node
  annotation), so that its PreBind completes.

Pods are compared while both sides see the same cluster. `oracle run` applies each outcome to
its own copy (bound to the node it picked, victims deleted and the preemptor nominated); where
the real cluster moves differently, the rest is compared over a new snapshot read back from
the server (a segment ends): after a preemption (the real preemptor is then bound once its
victims are gone), a tie broken otherwise than by the oracle's first-by-name rule, a volume
bound in PreBind (the oracle does not bind claims), or any difference. An unschedulable pod
without a nomination is deleted once its FailedScheduling is read: pending, it changes nothing
for the pods after it on the oracle's side, and left in the real cluster it would be retried
on the next event. One that keeps a nomination holds its room on both sides until the segment
ends (then it is deleted); if kube-scheduler retries and binds it meanwhile, the segment ends
there (Tally.retried). kube-scheduler's answer is read from a watch on the pod, so a preemptor
bound a few milliseconds after its FailedScheduling is still seen unschedulable first.

Not exercised on purpose: OpportunisticBatching's node hint (a pod placed from the previous
cycle's results when it shares that pod's signature), percentageOfNodesToScore (at most six
nodes here, all scored), and the kinds the generator does not draw (DRA, CSIStorageCapacity).
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import pathlib
import ssl
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

from tests.differential import oracle as upstream
from tests.differential.harness import pod_key, started
from tests.differential.strategies import CSI_DRIVER, GPU, HOST_KEY, PRIORITY_CLASSES, STORAGE_CLASSES
from tests.kubeenv.control_plane import Component, ControlPlane

HOLD = 'kopfsched.dev/crosscheck-hold'
SELECTED_NODE = 'volume.kubernetes.io/selected-node'
LOWER, NEVER = 'PreemptLowerPriority', 'Never'

EXTRA_CLASSES: tuple[dict[str, Any], ...] = tuple(
    {'apiVersion': 'scheduling.k8s.io/v1', 'kind': 'PriorityClass', 'metadata': {'name': name}, 'value': value,
     'preemptionPolicy': policy}
    for name, value, policy in (('prio-0', 0, LOWER), ('prio-0-never', 0, NEVER), ('prio-100-never', 100, NEVER)))
ALL_CLASSES: tuple[dict[str, Any], ...] = (*PRIORITY_CLASSES, *EXTRA_CLASSES)
CLASSES = {(c['value'], c.get('preemptionPolicy', LOWER)): c['metadata']['name'] for c in ALL_CLASSES}
VALUES = {c['metadata']['name']: (c['value'], c.get('preemptionPolicy', LOWER)) for c in ALL_CLASSES}
GLOBAL_DEFAULT = next(c['metadata']['name'] for c in ALL_CLASSES if c.get('globalDefault'))

# What kube-scheduler reads, as (list path, apiVersion, kind); each a cluster-wide list.
KINDS = (('/api/v1/namespaces', 'v1', 'Namespace'), ('/api/v1/nodes', 'v1', 'Node'),
         ('/api/v1/pods', 'v1', 'Pod'), ('/api/v1/persistentvolumes', 'v1', 'PersistentVolume'),
         ('/api/v1/persistentvolumeclaims', 'v1', 'PersistentVolumeClaim'),
         ('/apis/storage.k8s.io/v1/storageclasses', 'storage.k8s.io/v1', 'StorageClass'),
         ('/apis/storage.k8s.io/v1/csinodes', 'storage.k8s.io/v1', 'CSINode'),
         ('/apis/scheduling.k8s.io/v1/priorityclasses', 'scheduling.k8s.io/v1', 'PriorityClass'),
         ('/apis/policy/v1/poddisruptionbudgets', 'policy/v1', 'PodDisruptionBudget'))


@dataclasses.dataclass
class Tally:
    """What the run compared, and every difference found."""

    nodes: int = 0
    """Pods whose node was compared: a unique top total, no preemption."""
    ties: int = 0
    """Pods bound among several top nodes (the real node must be one of them)."""
    messages: int = 0
    """Unschedulable pods whose FailedScheduling message was compared."""
    events: int = 0
    """FailedScheduling Events found with the compared message as their note."""
    preemptions: int = 0
    gated: int = 0
    segments: int = 0
    retried: int = 0
    """Times kube-scheduler bound a pod it had reported unschedulable (a segment ends)."""
    differences: list[str] = dataclasses.field(default_factory=list)
    real: dict[str, Outcome] = dataclasses.field(default_factory=dict)
    """kube-scheduler's first answer for each pod released."""
    after_preemption: dict[str, str | None] = dataclasses.field(default_factory=dict)
    """Where each pod kube-scheduler preempted for was bound once its victims were gone."""


@dataclasses.dataclass
class Outcome:
    result: str
    node: str | None = None
    message: str = ''
    nominated: str = ''


@dataclasses.dataclass
class Example:
    """One drawn cluster, renamed for the real server (see the module)."""

    index: int
    objects: list[dict[str, Any]]
    config: dict[str, Any] | None
    namespaces: list[str]
    nodes: list[str]
    pending: list[str]
    """Pending pods' keys in queue order."""
    created: dict[str, str]
    """The drawn creationTimestamp of each pending pod."""
    failed: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    """(pod, PodScheduled message) of each pod kube-scheduler reported unschedulable."""

    def name(self, base: str) -> str:
        return f'x{self.index}-{base}'


def pod_priority(pod: dict[str, Any]) -> str:
    """The PriorityClass that gives the drawn pod its priority and preemption policy."""
    spec = pod['spec']
    cls = spec.pop('priorityClassName', None) or GLOBAL_DEFAULT
    value, policy = VALUES[cls]
    if 'priority' in spec:
        value = spec.pop('priority')
    policy = spec.pop('preemptionPolicy', None) or policy
    return CLASSES[(value, policy)]


def prepare(drawn: list[dict[str, Any]], index: int) -> Example:
    """The drawn cluster as the real server can hold it (the module's list)."""
    objects = copy.deepcopy(drawn)
    config = next((o for o in objects if o['kind'] == 'KubeSchedulerConfiguration'), None)
    objects = [o for o in objects if o['kind'] not in ('KubeSchedulerConfiguration', 'PriorityClass')]
    ex = Example(index, objects, config, [], [], [], {})

    def ns(name: str | None) -> str:
        return ex.name(name or 'default')

    for o in objects:
        meta, kind = o['metadata'], o['kind']
        if kind == 'Namespace':
            meta['name'] = ns(meta['name'])
            ex.namespaces.append(meta['name'])
        elif kind == 'Node':
            meta['name'] = meta['labels'][HOST_KEY] = ex.name(meta['name'])
            ex.nodes.append(meta['name'])
        elif kind == 'CSINode':
            meta['name'] = ex.name(meta['name'])
            for driver in o['spec']['drivers']:
                driver['nodeID'] = meta['name']
        elif kind == 'PersistentVolume':
            meta['name'] = ex.name(meta['name'])
            if 'claimRef' in o['spec']:
                o['spec']['claimRef']['namespace'] = ns(o['spec']['claimRef']['namespace'])
        elif kind == 'PersistentVolumeClaim':
            meta['namespace'] = ns(meta.get('namespace'))
            if o['spec'].get('volumeName'):
                o['spec']['volumeName'] = ex.name(o['spec']['volumeName'])
        elif kind == 'PodDisruptionBudget':
            meta['namespace'] = ns(meta.get('namespace'))
        elif kind == 'Pod':
            meta['namespace'] = ns(meta.get('namespace'))
            spec, status = o['spec'], o.get('status') or {}
            spec['priorityClassName'] = pod_priority(o)
            for container in (*spec['containers'], *spec.get('initContainers', [])):
                resources = container.get('resources') or {}
                if GPU in resources.get('requests', {}):  # an extended resource: limit = request
                    resources.setdefault('limits', {})[GPU] = resources['requests'][GPU]
            if spec.get('nodeName'):
                spec['nodeName'] = ex.name(spec['nodeName'])
            if status.get('nominatedNodeName'):
                status['nominatedNodeName'] = ex.name(status['nominatedNodeName'])
            for kind_ in ('podAffinity', 'podAntiAffinity'):
                for terms in ((spec.get('affinity') or {}).get(kind_) or {}).values():
                    for term in terms:
                        term = term.get('podAffinityTerm', term)
                        if 'namespaces' in term:
                            term['namespaces'] = [ns(n) for n in term['namespaces']]
    sizes: dict[str, int] = {}
    for o in objects:
        for image in (o['status'].get('images') or []) if o['kind'] == 'Node' else []:
            image['sizeBytes'] = sizes.setdefault(image['names'][0], image['sizeBytes'])
    pending = [o for o in objects if o['kind'] == 'Pod' and not o['spec'].get('nodeName')]
    pending.sort(key=lambda p: p['metadata']['creationTimestamp'])  # stable: input order second
    ex.pending = [pod_key(p) for p in pending]
    ex.created = {pod_key(p): p['metadata']['creationTimestamp'] for p in pending}
    return ex


def install_classes(cluster: ControlPlane) -> None:
    """The PriorityClasses and StorageClasses every example shares."""
    for body in ALL_CLASSES:
        cluster.post('/apis/scheduling.k8s.io/v1/priorityclasses', body)
    for body in STORAGE_CLASSES:
        cluster.post('/apis/storage.k8s.io/v1/storageclasses', body)


def path_of(kind: str, namespace: str | None = None, name: str = '') -> str:
    base, _, _ = next(k for k in KINDS if k[2] == kind)
    if namespace:
        group, resource = base.rsplit('/', 1)
        base = f'{group}/namespaces/{namespace}/{resource}'
    return f'{base}/{name}' if name else base


def create(cluster: ControlPlane, ex: Example) -> None:
    """Every object of the example, settled as drawn (module docstring), pending pods held."""
    order = ('Namespace', 'Node', 'CSINode', 'PersistentVolume', 'PersistentVolumeClaim', 'PodDisruptionBudget')
    for kind in order:
        for o in (o for o in ex.objects if o['kind'] == kind):
            body = {k: v for k, v in o.items() if k != 'status'}
            if kind == 'Namespace':
                cluster.post(path_of(kind), body)
            elif kind == 'Node':
                cluster.post(path_of(kind), o)  # a node keeps its status (as a kubelet registers it)
            elif kind == 'PodDisruptionBudget':
                meta = o['metadata']
                cluster.post(path_of(kind, meta['namespace']), body)
                cluster.patch(path_of(kind, meta['namespace'], meta['name']) + '/status', {'status': o['status']})
            else:
                cluster.post(path_of(kind, o['metadata'].get('namespace')), body)
        if kind == 'Namespace':
            for name in ex.namespaces:
                create_namespace_wait(cluster, name)
    running = [o for o in ex.objects if o['kind'] == 'Pod' and o['spec'].get('nodeName')]
    for o in running:
        cluster.post(path_of('Pod', o['metadata']['namespace']), {k: v for k, v in o.items() if k != 'status'})
    for o in (o for o in ex.objects if o['kind'] == 'Pod' and not o['spec'].get('nodeName')):
        body = copy.deepcopy({k: v for k, v in o.items() if k != 'status'})
        body['metadata'].pop('creationTimestamp', None)
        body['spec']['schedulingGates'] = [*body['spec'].get('schedulingGates', []), {'name': HOLD}]
        meta = body['metadata']
        cluster.post(path_of('Pod', meta['namespace']), body)
        nominated = (o.get('status') or {}).get('nominatedNodeName')
        if nominated:
            cluster.patch(path_of('Pod', meta['namespace'], meta['name']) + '/status',
                          {'status': {'nominatedNodeName': nominated}})

    def settled() -> bool:
        nodes = [cluster.get(path_of('Node', name=n)) for n in ex.nodes]
        if not all(any(c['type'] == 'Ready' and c['status'] == 'True' for c in (n.get('status') or {}).get(
                'conditions') or []) for n in nodes):
            return False
        if not all(((cluster.get(path_of('Pod', o['metadata']['namespace'], o['metadata']['name'])) or {}).get(
                'status') or {}).get('podIP') for o in running):
            return False
        for o in ex.objects:
            if o['kind'] == 'PersistentVolumeClaim' and o['spec'].get('volumeName'):
                got = cluster.get(path_of('PersistentVolumeClaim', o['metadata']['namespace'], o['metadata']['name']))
                if (got.get('status') or {}).get('phase') != 'Bound':
                    return False
        return True
    cluster.wait_for(settled, timeout=60, what=f'example {ex.index}: nodes Ready, pods Running, claims Bound',
                     interval=0.1)
    for o in running:  # after kwok's pod-ready stage, which writes its own start time
        meta = o['metadata']
        cluster.patch(path_of('Pod', meta['namespace'], meta['name']) + '/status',
                      {'status': {'startTime': o['status']['startTime']}})


def create_namespace_wait(cluster: ControlPlane, name: str) -> None:
    cluster.wait_for(lambda: cluster.get(f'/api/v1/namespaces/{name}/serviceaccounts/default'),
                     timeout=30, what=f'the default ServiceAccount of {name}')


def snapshot(cluster: ControlPlane, ex: Example) -> list[dict[str, Any]]:
    """What kube-scheduler sees now, as a `kopfsched simulate` snapshot: every object of the
    kinds it reads, the held pods without the test's gate and with their drawn
    creationTimestamp; pods of other examples' namespaces are on no node that exists."""
    items: list[dict[str, Any]] = []
    for path, api_version, kind in KINDS:
        for o in cluster.get(path)['items']:
            o = {'apiVersion': api_version, 'kind': kind, **o}
            o['metadata'].pop('managedFields', None)
            if kind == 'Pod':
                key = pod_key(o)
                if o['metadata']['namespace'] not in ex.namespaces:
                    assert o['spec'].get('nodeName') not in ex.nodes, key
                    continue
                if key in ex.created and not o['spec'].get('nodeName'):
                    o['spec']['schedulingGates'] = [g for g in o['spec'].get('schedulingGates', [])
                                                    if g['name'] != HOLD]
                    o['metadata']['creationTimestamp'] = ex.created[key]
            items.append(o)
    if ex.config is not None:
        items.append(ex.config)
    return items


def get_pod(cluster: ControlPlane, key: str) -> dict[str, Any]:
    namespace, name = key.split('/', 1)
    return cluster.get(path_of('Pod', namespace, name)) or {}


@contextlib.contextmanager
def provisioner(cluster: ControlPlane, ex: Example) -> Iterator[None]:
    """csi.example.com's provisioner while the example runs: for a claim whose node
    kube-scheduler selected, a PV on that node pre-bound to it (the PV controller completes the
    binding, and kube-scheduler's PreBind with it)."""
    stop = threading.Event()

    def provision() -> None:
        while not stop.wait(0.1):
            for namespace in ex.namespaces:
                for claim in cluster.get(path_of('PersistentVolumeClaim', namespace))['items']:
                    node = (claim['metadata'].get('annotations') or {}).get(SELECTED_NODE)
                    name = f"{namespace}-{claim['metadata']['name']}"
                    if not node or claim['spec'].get('volumeName') or cluster.get(
                            path_of('PersistentVolume', name=name)):
                        continue
                    cluster.post(path_of('PersistentVolume'), {
                        'apiVersion': 'v1', 'kind': 'PersistentVolume', 'metadata': {'name': name},
                        'spec': {'capacity': claim['spec']['resources']['requests'],
                                 'accessModes': claim['spec']['accessModes'],
                                 'storageClassName': claim['spec']['storageClassName'],
                                 'persistentVolumeReclaimPolicy': 'Retain',
                                 'csi': {'driver': CSI_DRIVER, 'volumeHandle': name},
                                 'claimRef': {'kind': 'PersistentVolumeClaim', 'namespace': namespace,
                                              'name': claim['metadata']['name'], 'uid': claim['metadata']['uid']},
                                 'nodeAffinity': {'required': {'nodeSelectorTerms': [{'matchExpressions': [
                                     {'key': HOST_KEY, 'operator': 'In', 'values': [node]}]}]}}}})
    thread = threading.Thread(target=provision, daemon=True, name=f'provisioner-x{ex.index}')
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)


def watch_pod(cluster: ControlPlane, key: str, resource_version: str, timeout: float) -> Iterator[dict[str, Any]]:
    """The pod as every write after `resource_version` left it (a watch: no state is missed,
    however fast kube-scheduler moves it on)."""
    namespace, name = key.split('/', 1)
    query = urllib.parse.urlencode({'watch': '1', 'fieldSelector': f'metadata.name={name}',
                                    'resourceVersion': resource_version, 'timeoutSeconds': str(int(timeout))})
    request = urllib.request.Request(f"{cluster.url}{path_of('Pod', namespace)}?{query}")
    context = ssl.create_default_context(cafile=str(cluster.ca_file))
    context.load_cert_chain(str(cluster.admin.cert), str(cluster.admin.key))
    with urllib.request.urlopen(request, context=context, timeout=timeout + 5) as response:
        for line in response:
            event = json.loads(line)
            if event['type'] == 'ERROR':
                raise AssertionError(f'{key}: watch error {event["object"]}')
            yield event['object']


def condition(pod: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in (pod.get('status') or {}).get('conditions') or [] if c['type'] == 'PodScheduled'), {})


def release(cluster: ControlPlane, key: str, *, timeout: float = 60) -> Outcome:
    """Remove the test's gate from the pod and watch for kube-scheduler's first answer: bound,
    or PodScheduled False with its FailedScheduling message."""
    namespace, name = key.split('/', 1)
    pod = get_pod(cluster, key)
    gates = [g for g in pod['spec'].get('schedulingGates', []) if g['name'] != HOLD]
    released = cluster.patch(path_of('Pod', namespace, name), {'spec': {'schedulingGates': gates or None}})
    if gates:
        return Outcome('Gated')
    for pod in watch_pod(cluster, key, released['metadata']['resourceVersion'], timeout):
        if pod['spec'].get('nodeName'):
            return Outcome('Scheduled', node=pod['spec']['nodeName'])
        cond = condition(pod)
        if cond.get('status') == 'False' and cond.get('reason') in ('Unschedulable', 'SchedulerError'):
            return Outcome('Unschedulable' if cond['reason'] == 'Unschedulable' else 'Error',
                           message=cond.get('message', ''),
                           nominated=(pod.get('status') or {}).get('nominatedNodeName') or '')
    cluster.check()
    raise AssertionError(f'{key}: neither bound nor reported unschedulable in {timeout:g} s: {get_pod(cluster, key)}')


def set_started(cluster: ControlPlane, ex: Example, key: str) -> None:
    """The oracle's start-time rule for a pod bound in the run (harness.started), once kwok
    has made it Running."""
    namespace, name = key.split('/', 1)
    cluster.wait_for(lambda: (get_pod(cluster, key).get('status') or {}).get('podIP'), timeout=30,
                     what=f'{key} Running (kwok)', interval=0.05)
    cluster.patch(path_of('Pod', namespace, name) + '/status',
                  {'status': {'startTime': started({'metadata': {'creationTimestamp': ex.created[key]}})}})


def uses_unbound_claims(cluster: ControlPlane, key: str) -> bool:
    pod = get_pod(cluster, key)
    namespace = pod['metadata']['namespace']
    for volume in pod['spec'].get('volumes') or []:
        claim_name = (volume.get('persistentVolumeClaim') or {}).get('claimName')
        claim = claim_name and cluster.get(path_of('PersistentVolumeClaim', namespace, claim_name))
        if claim and (claim.get('status') or {}).get('phase') != 'Bound':
            return True
        if claim and (claim['metadata'].get('annotations') or {}).get(SELECTED_NODE):
            return True  # bound in this pod's PreBind
    return False


class Scheduler:
    """The real kube-scheduler, restarted only when an example's configuration differs."""

    def __init__(self, cluster: ControlPlane) -> None:
        self.cluster = cluster
        self.component: Component | None = None
        self.config: dict[str, Any] | None = None
        self.starts = 0

    def serve(self, config: dict[str, Any] | None) -> None:
        wanted = {k: v for k, v in (config or {}).items() if k not in ('apiVersion', 'kind')}
        if self.component is not None and wanted == self.config:
            return
        self.stop()
        self.starts += 1
        self.component = self.cluster.start_scheduler(wanted, name=f'kube-scheduler-{self.starts}')
        self.config = wanted

    def stop(self) -> None:
        if self.component is not None:
            self.cluster.components.pop(self.component.name).stop()
            self.component = None


def compare(tally: Tally, ex: Example, key: str, entry: dict[str, Any], real: Outcome,
            prior_nomination: str) -> bool:
    """Record the comparison of one pod; True when the real cluster went where the oracle's
    copy went (the segment may go on)."""
    where = f'example {ex.index} {key}'
    if entry['result'] == 'Gated':
        tally.gated += 1
        if real.result != 'Gated':
            tally.differences.append(f'{where}: oracle Gated, kube-scheduler {real.result}')
            return False
        return True
    if entry['result'] == 'Scheduled':
        if real.result != 'Scheduled':
            tally.differences.append(f'{where}: oracle Scheduled on {entry["node"]}, kube-scheduler '
                                     f'{real.result}: {real.message!r}')
            return False
        if len(entry['topNodes']) == 1 or entry.get('nominatedNodeFits'):
            tally.nodes += 1
            why = 'its nominated node fits' if entry.get('nominatedNodeFits') else 'unique top total'
            if real.node != entry['node']:
                tally.differences.append(f'{where}: oracle binds to {entry["node"]} ({why}), '
                                         f'kube-scheduler to {real.node}')
                return False
            return True
        tally.ties += 1
        if real.node not in entry['topNodes']:
            tally.differences.append(f'{where}: kube-scheduler bound to {real.node}, not one of the oracle\'s '
                                     f'top nodes {entry["topNodes"]}')
        return real.node == entry['node']
    # Unschedulable (or Error): the FailedScheduling message, and the nomination it leaves.
    if real.result == 'Scheduled':
        tally.differences.append(f'{where}: oracle {entry["result"]} ({entry["message"]!r}), kube-scheduler '
                                 f'bound it to {real.node}')
        return False
    tally.messages += 1
    ok = True
    if real.message != entry['message']:
        tally.differences.append(f'{where}: FailedScheduling message\n  oracle:         {entry["message"]!r}\n'
                                 f'  kube-scheduler: {real.message!r}')
        ok = False
    # What the oracle's copy leaves: its new nomination, none (cleared), or the earlier one.
    expected = entry['nominatedNode'] or ('' if entry.get('nominationCleared') else prior_nomination)
    candidates = (entry.get('preemption') or {}).get('candidates') or []
    if entry['nominatedNode'] and len(candidates) != 1:
        expected = real.nominated  # several candidates: the pick is compared no further
    if real.nominated != expected:
        tally.differences.append(f'{where}: nominated node after the attempt: oracle {expected!r}, '
                                 f'kube-scheduler {real.nominated!r}')
        ok = False
    return ok and not entry['nominatedNode']


def settle_preemptor(cluster: ControlPlane, ex: Example, key: str, tally: Tally) -> None:
    """After kube-scheduler nominated the pod and deleted its victims: bound once they are gone
    (then given the oracle's start-time rule), or deleted."""
    tally.preemptions += 1
    tally.after_preemption[key] = None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pod = get_pod(cluster, key)
        if pod['spec'].get('nodeName'):
            tally.after_preemption[key] = pod['spec']['nodeName']
            set_started(cluster, ex, key)
            return
        time.sleep(0.1)
    delete_pod(cluster, key)


def delete_pod(cluster: ControlPlane, key: str) -> None:
    namespace, name = key.split('/', 1)
    cluster.delete(path_of('Pod', namespace, name))
    cluster.wait_for(lambda: not get_pod(cluster, key), timeout=30, what=f'{key} deleted', interval=0.05)


def quiet(cluster: ControlPlane, ex: Example) -> None:
    """Before a snapshot: no pod of the example terminating, and a moment for kube-scheduler's
    informers to see the last writes (the snapshot is read from the server, not from them)."""
    def done() -> bool:
        return not any(p['metadata'].get('deletionTimestamp')
                       for ns in ex.namespaces for p in cluster.get(path_of('Pod', ns))['items'])
    cluster.wait_for(done, timeout=30, what=f'example {ex.index}: victims gone', interval=0.05)
    time.sleep(0.3)


@dataclasses.dataclass
class Bench:
    """One control plane, its kube-scheduler and the oracle, for examples one after another."""

    cluster: ControlPlane
    scheduler: Scheduler
    binary: pathlib.Path
    workdir: pathlib.Path
    examples: int = 0
    configs: int = 0
    """Examples with a KubeSchedulerConfiguration of their own."""

    def run(self, drawn: list[dict[str, Any]], tally: Tally) -> Example:
        """One cluster through both, pod by pod (the module's docstring)."""
        ex = prepare(drawn, self.examples)
        self.examples += 1
        self.configs += ex.config is not None
        (self.workdir / f'x{ex.index}-drawn.json').write_text(json.dumps(drawn, indent=1))
        self.scheduler.serve(ex.config)
        create(self.cluster, ex)
        with provisioner(self.cluster, ex):
            _segments(self.cluster, ex, self.binary, self.workdir, tally)
        check_events(self.cluster, ex, tally)
        remove(self.cluster, ex)
        return ex


def _segments(cluster: ControlPlane, ex: Example, binary: pathlib.Path, workdir: pathlib.Path, tally: Tally) -> None:
    """The pending pods in queue order, one `oracle run` per segment (the module's docstring)."""
    remaining = list(ex.pending)
    kept: list[str] = []  # unschedulable, still nominated: holding room until the segment ends
    while remaining:
        for key in kept:
            delete_pod(cluster, key)
        kept = []
        quiet(cluster, ex)
        tally.segments += 1
        path = workdir / f'x{ex.index}-segment-{tally.segments}.json'
        path.write_text(json.dumps({'apiVersion': 'v1', 'kind': 'List', 'items': snapshot(cluster, ex)}))
        entries = {f"{e['namespace']}/{e['name']}": e for e in upstream.run(binary, str(path))['pods']}
        while remaining:
            key = remaining.pop(0)
            entry = entries[key]
            prior = (get_pod(cluster, key).get('status') or {}).get('nominatedNodeName') or ''
            real = tally.real[key] = release(cluster, key)
            same = compare(tally, ex, key, entry, real, prior)
            if real.result == 'Scheduled':
                set_started(cluster, ex, key)
                same = same and not uses_unbound_claims(cluster, key)
            elif real.result in ('Unschedulable', 'Error'):
                ex.failed.append((key, real.message))
                if real.nominated and (real.nominated != prior or entry['nominatedNode']):  # victims going
                    settle_preemptor(cluster, ex, key, tally)
                    same = False
                elif real.nominated:
                    kept.append(key)
                else:
                    delete_pod(cluster, key)
            if any(get_pod(cluster, k)['spec'].get('nodeName') for k in kept):
                tally.retried += 1  # kube-scheduler retried a nominated pod and bound it
                same = False
            if not same:
                break


def check_events(cluster: ControlPlane, ex: Example, tally: Tally) -> None:
    """Each PodScheduled message compared is also a FailedScheduling Event's note (the Event
    is posted a moment after the condition)."""
    def missing() -> list[tuple[str, str]]:
        notes = {(e['regarding']['namespace'], e['regarding']['name'], e.get('note'))
                 for ns in ex.namespaces
                 for e in cluster.get(f'/apis/events.k8s.io/v1/namespaces/{ns}/events')['items']
                 if e['reason'] == 'FailedScheduling'}
        return [(key, message) for key, message in ex.failed if (*key.split('/', 1), message) not in notes]
    deadline = time.monotonic() + 10
    while missing() and time.monotonic() < deadline:
        time.sleep(0.2)
    absent = missing()
    tally.events += len(ex.failed) - len(absent)
    for key, message in absent:
        tally.differences.append(f'example {ex.index} {key}: no FailedScheduling Event with the note {message!r}')


def remove(cluster: ControlPlane, ex: Example) -> None:
    """The example's namespaces (their pods and claims go with them), nodes, CSINodes and PVs;
    what is still terminating is on no node the next example has."""
    for name in ex.namespaces:
        cluster.delete(f'/api/v1/namespaces/{name}')
    for o in ex.objects:
        if o['kind'] in ('Node', 'CSINode'):
            cluster.delete(path_of(o['kind'], name=o['metadata']['name']))
    for pv in cluster.get(path_of('PersistentVolume'))['items']:
        if pv['metadata']['name'].startswith(ex.name('')):
            cluster.delete(path_of('PersistentVolume', name=pv['metadata']['name']))
    # An Available PV could match a later example's claim: gone before it starts.
    cluster.wait_for(lambda: not any(pv['metadata']['name'].startswith(ex.name('')) and
                                     (pv.get('status') or {}).get('phase') in ('Available', 'Pending')
                                     for pv in cluster.get(path_of('PersistentVolume'))['items']),
                     timeout=30, what=f'example {ex.index}: its available PVs gone', interval=0.1)



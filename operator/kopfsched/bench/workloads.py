"""Benchmark workloads, shaped like upstream's scheduler_perf test cases.

Each workload returns the nodes, the pods already running on them (bound directly, as
scheduler_perf's initial pods), and the pods to schedule while measuring. A workload with
`churn` also creates one churn pod every `churn_interval` seconds while the measured pods
schedule (scheduler_perf's `churn` op in `create` mode); only the measured pods count.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]
ZONES = ("zone-a", "zone-b", "zone-c")


@dataclass
class Workload:
    nodes: list[Obj]
    init_pods: list[Obj]
    pods: list[Obj]
    churn: Callable[[int], Obj] | None = None
    """Makes the i-th churn pod; None: no churn."""
    churn_interval: float = 0.2
    """Seconds between two churn pods (scheduler_perf's intervalMilliseconds: 200)."""
    objects: list[Obj] = field(default_factory=list)
    """Other API objects, loaded before the pods (e.g. DeviceClasses, ResourceSlices, ResourceClaims)."""
    settle: bool = False
    """Some measured pods fit nowhere: the run ends when every measured pod was scheduled or
    found unschedulable once, rather than when every one is scheduled."""


def default_node(i: int, *, zones: bool = False) -> Obj:
    """scheduler_perf's node-default.yaml: 4 CPU, 32Gi, 110 pods."""
    labels = {"kubernetes.io/hostname": f"node-{i}"}
    if zones:
        labels["topology.kubernetes.io/zone"] = ZONES[i % len(ZONES)]
    allocatable = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{i}", "labels": labels},
            "spec": {}, "status": {"allocatable": allocatable, "capacity": dict(allocatable)}}


def default_pod(name: str, *, namespace: str = "sched-0", labels: dict[str, str] | None = None,
                node_name: str | None = None, cpu: str = "100m", memory: str = "500Mi",
                **spec_extra: Any) -> Obj:
    """scheduler_perf's pod-default.yaml: one pause container requesting 100m / 500Mi."""
    spec: Obj = {"containers": [{
        "name": "pause", "image": "registry.k8s.io/pause:3.10", "ports": [{"containerPort": 80}],
        "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}},
    }], **spec_extra}
    if node_name:
        spec["nodeName"] = node_name
    meta: Obj = {"name": name, "namespace": namespace, "uid": f"{namespace}-{name}"}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Pending"}}


def basic(nodes: int, init_pods: int, pods: int) -> Workload:
    """SchedulingBasic: plain pods with small requests onto plain nodes."""
    node_objs = [default_node(i) for i in range(nodes)]
    init = [default_pod(f"init-{i}", namespace="sched-setup", node_name=f"node-{i % nodes}")
            for i in range(init_pods)]
    return Workload(node_objs, init, [default_pod(f"pod-{i}") for i in range(pods)])


def _anti_affinity_pod(name: str, *, namespace: str, node_name: str | None = None) -> Obj:
    """scheduler_perf's pod-with-pod-anti-affinity.yaml: color=green, at most one per hostname."""
    term = {"labelSelector": {"matchLabels": {"color": "green"}}, "topologyKey": "kubernetes.io/hostname",
            "namespaces": ["sched-1", "sched-0"]}
    return default_pod(name, namespace=namespace, labels={"color": "green"}, node_name=node_name,
                       affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}})


def pod_anti_affinity(nodes: int, init_pods: int, pods: int) -> Workload:
    """SchedulingPodAntiAffinity (500Nodes: 100 init pods, 400 measured): every pod repels every
    other by hostname, init pods in sched-0 and measured pods in sched-1."""
    node_objs = [default_node(i) for i in range(nodes)]
    init = [_anti_affinity_pod(f"init-{i}", namespace="sched-0", node_name=f"node-{i % nodes}")
            for i in range(init_pods)]
    return Workload(node_objs, init, [_anti_affinity_pod(f"pod-{i}", namespace="sched-1") for i in range(pods)])


def _spreading_pod(name: str) -> Obj:
    """scheduler_perf's pod-with-topology-spreading.yaml: color=blue, zone maxSkew 5, DoNotSchedule."""
    constraint = {"maxSkew": 5, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
                  "labelSelector": {"matchLabels": {"color": "blue"}}}
    return default_pod(name, labels={"color": "blue"}, topologySpreadConstraints=[constraint])


def topology_spread(nodes: int, init_pods: int, pods: int) -> Workload:
    """TopologySpreading (500Nodes: 1000 init pods, 1000 measured): nodes over three zones, plain
    init pods, measured pods spread by zone."""
    node_objs = [default_node(i, zones=True) for i in range(nodes)]
    init = [default_pod(f"init-{i}", namespace="sched-setup", node_name=f"node-{i % nodes}")
            for i in range(init_pods)]
    return Workload(node_objs, init, [_spreading_pod(f"pod-{i}") for i in range(pods)])


def _low_priority_pods(init_pods: int, nodes: int) -> list[Obj]:
    """pod-low-priority.yaml, bound round robin: priority 0, 900m (four use 3.6 of a node's 4 CPU)."""
    init = []
    for i in range(init_pods):
        pod = default_pod(f"init-{i}", namespace="sched-setup", node_name=f"node-{i % nodes}", cpu="900m",
                          terminationGracePeriodSeconds=0)
        pod["status"] = {"phase": "Running"}
        init.append(pod)
    return init


def _high_priority_pod(name: str) -> Obj:
    """pod-high-priority.yaml: priority 10, 3 CPU (requests and limits)."""
    return default_pod(name, cpu="3", priority=10)


def preemption(nodes: int, init_pods: int, pods: int) -> Workload:
    """PreemptionBasic (scheduler_perf's 1000Nodes: 4000 init pods, 1000 measured; keep 4 init pods
    per node): nodes full of low-priority pods, then high-priority pods of 3 CPU that each must
    preempt three of them."""
    node_objs = [default_node(i) for i in range(nodes)]
    return Workload(node_objs, _low_priority_pods(init_pods, nodes),
                    [_high_priority_pod(f"pod-{i}") for i in range(pods)])


def preemption_async(nodes: int, init_pods: int, pods: int) -> Workload:
    """PreemptionAsync (5000Nodes: 20000 init pods, 5000 measured): nodes full of low-priority pods
    as PreemptionBasic; a high-priority preemptor (3 CPU) every 200 ms throughout; the measured pods
    are ordinary (pod-default.yaml) and always fit in the 0.4 CPU left per node."""
    node_objs = [default_node(i) for i in range(nodes)]
    return Workload(node_objs, _low_priority_pods(init_pods, nodes), [default_pod(f"pod-{i}") for i in range(pods)],
                    churn=lambda i: _high_priority_pod(f"preemptor-{i}"))


def _large_cpu_pod(name: str) -> Obj:
    """pod-high-priority-large-cpu.yaml: priority 10, requests 9 CPU (more than any node has), no limits."""
    pod = default_pod(name, priority=10)
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "9", "memory": "500Mi"}}
    return pod


def unschedulable(nodes: int, init_pods: int, pods: int) -> Workload:
    """Unschedulable (5kNodes/20kInit/10kPods): ordinary pods running, a high-priority pod that
    fits nowhere (9 CPU) every 200 ms throughout, and ordinary measured pods."""
    node_objs = [default_node(i) for i in range(nodes)]
    init = [default_pod(f"init-{i}", namespace="sched-setup", node_name=f"node-{i % nodes}")
            for i in range(init_pods)]
    return Workload(node_objs, init, [default_pod(f"pod-{i}") for i in range(pods)],
                    churn=lambda i: _large_cpu_pod(f"unschedulable-{i}"))


DRA_DRIVER = "test-driver.cdi.k8s.io"
DRA_DEVICES_PER_NODE = 10
"""scheduler_perf's maxClaimsPerNode for SchedulingWithResourceClaimTemplate/5000pods_500nodes."""


def _claim(name: str, namespace: str, owner: str, *, node: str | None = None, device: int = 0) -> Obj:
    """A claim as the resourceclaim controller makes it from scheduler_perf's
    resourceclaimtemplate.yaml (one device of test-class); allocated and reserved when `node` is set."""
    claim: Obj = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                  "metadata": {"name": name, "namespace": namespace, "uid": f"{namespace}-{name}",
                               "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": owner,
                                                    "uid": f"{namespace}-{owner}", "controller": True}]},
                  "spec": {"devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": "test-class"}}]}}}
    if node is not None:
        claim["status"] = {
            "allocation": {"devices": {"results": [{"request": "req-0", "driver": DRA_DRIVER, "pool": node,
                                                    "device": f"instance-{device}"}]},
                           "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                               {"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
            "reservedFor": [{"resource": "pods", "name": owner, "uid": f"{namespace}-{owner}"}]}
    return claim


def _claim_pod(name: str, namespace: str, *, node_name: str | None = None) -> Obj:
    """scheduler_perf's pod-with-claim-template.yaml, its claim already generated."""
    pod = default_pod(name, namespace=namespace, node_name=node_name,
                      resourceClaims=[{"name": "resource", "resourceClaimTemplateName": "test-claim-template"}])
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "resource"}]
    pod["status"]["resourceClaimStatuses"] = [{"name": "resource", "resourceClaimName": f"{name}-resource"}]
    return pod


def dra(nodes: int, init_pods: int, pods: int) -> Workload:
    """SchedulingWithResourceClaimTemplate (5000pods_500nodes: 500 nodes, 2500 init pods, 2500
    measured): every node's driver publishes ten devices in one ResourceSlice, every pod has one
    claim from a template asking for one device of the class; init pods hold allocated claims."""
    per_node = max(DRA_DEVICES_PER_NODE, -(-(init_pods + pods) // nodes))
    node_objs = [default_node(i) for i in range(nodes)]
    selector = {"cel": {"expression": f'device.driver == "{DRA_DRIVER}"'}}
    objects: list[Obj] = [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                           "metadata": {"name": "test-class"}, "spec": {"selectors": [selector]}}]
    for i in range(nodes):
        objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                        "metadata": {"name": f"node-{i}-{DRA_DRIVER}"},
                        "spec": {"driver": DRA_DRIVER, "nodeName": f"node-{i}",
                                 "pool": {"name": f"node-{i}", "generation": 1, "resourceSliceCount": 1},
                                 "devices": [{"name": f"instance-{d}"} for d in range(per_node)]}})
    init = []
    for i in range(init_pods):
        node = f"node-{i % nodes}"
        init.append(_claim_pod(f"init-{i}", "init", node_name=node))
        objects.append(_claim(f"init-{i}-resource", "init", f"init-{i}", node=node, device=i // nodes))
    measured = []
    for i in range(pods):
        measured.append(_claim_pod(f"pod-{i}", "test"))
        objects.append(_claim(f"pod-{i}-resource", "test", f"pod-{i}"))
    return Workload(node_objs, init, measured, objects=objects)


GPU_RESOURCE = "nvidia.com/gpu"
GPU_MODEL_LABEL = "nvidia.com/gpu.product"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"

GPU_TRACE_NODE_SHAPES: tuple[tuple[int, int, int, int, str], ...] = (
    # (nodes, CPUs, memory GiB, GPUs, GPU model): the 1523 nodes of Alibaba's cluster-trace-gpu-v2023
    # (openb_node_list_all_node.csv) grouped by shape; 310 of them have no GPU.
    (200, 32, 256, 0, ""), (110, 96, 512, 0, ""),
    (549, 96, 384, 8, "G2"),
    (387, 104, 512, 2, "T4"), (17, 96, 384, 4, "T4"),
    (131, 64, 256, 2, "P100"), (3, 32, 128, 1, "P100"),
    (39, 128, 1024, 8, "G3"),
    (21, 96, 768, 8, "V100M32"), (9, 64, 256, 4, "V100M32"),
    (8, 96, 384, 8, "V100M16"), (28, 64, 256, 4, "V100M16"), (19, 8, 32, 1, "V100M16"),
    (2, 32, 128, 1, "A10"),
)
GPU_TRACE_SEED = 2023


def _gpu_trace_node(i: int, cpus: int, memory_gib: int, gpus: int, model: str) -> Obj:
    """A node of the GPU trace: its GPU model and count as labels (as NVIDIA's GPU feature
    discovery sets them), and GPU nodes tainted as GPU pools are (pods that request GPUs get
    the toleration from the ExtendedResourceToleration admission plugin)."""
    name = f"node-{i}"
    labels = {"kubernetes.io/hostname": name}
    allocatable = {"cpu": str(cpus), "memory": f"{memory_gib}Gi", "pods": "110"}
    spec: Obj = {}
    if gpus:
        labels[GPU_MODEL_LABEL] = model
        labels[GPU_COUNT_LABEL] = str(gpus)
        allocatable[GPU_RESOURCE] = str(gpus)
        spec["taints"] = [{"key": GPU_RESOURCE, "value": "present", "effect": "NoSchedule"}]
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "spec": spec, "status": {"allocatable": allocatable, "capacity": dict(allocatable)}}


def _gpu_trace_nodes(nodes: int) -> list[Obj]:
    """`nodes` nodes whose shapes follow the trace's mix (all 1523 of them at 1523), shuffled."""
    shapes = [shape[1:] for shape in GPU_TRACE_NODE_SHAPES for _ in range(shape[0])]
    random.Random(GPU_TRACE_SEED).shuffle(shapes)
    return [_gpu_trace_node(i, *shapes[i * len(shapes) // nodes]) for i in range(nodes)]


def _gpu_trace_pod(name: str, rng: random.Random, models: list[str], affinity_share: float,
                   model_rng: random.Random) -> Obj:
    """A pod of the trace's mix (openb_pod_list_default.csv): one in eight needs no GPU; of the
    others, almost all want one GPU, a few 2, 4 or 8. One pod in a hundred asks for more than any
    node has (CPU-only pods of 160 CPUs). `affinity_share` of the GPU pods require one or two
    GPU models by required node affinity, as the trace's gpu_spec column does."""
    gpus = 0
    if rng.random() >= 0.133:
        gpus = rng.choices((1, 2, 4, 8), weights=(6989, 16, 15, 44))[0]
    if gpus:
        cpu = rng.choice((2, 4, 6, 8, 12)) * gpus
        memory = cpu * rng.choice((4, 8))
    elif rng.random() < 0.075:
        cpu, memory = 160, 64
    else:
        cpu = rng.choice((1, 2, 4, 8, 16, 32))
        memory = cpu * rng.choice((2, 4, 8))
    requests = {"cpu": str(cpu), "memory": f"{memory}Gi"}
    extra: Obj = {}
    if gpus:
        requests[GPU_RESOURCE] = str(gpus)
        extra["tolerations"] = [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]
        if rng.random() < affinity_share:  # the models from a draw of their own: the same pods either way
            wanted = sorted(set(model_rng.choices(models, k=model_rng.choice((1, 2)))))
            term = {"matchExpressions": [{"key": GPU_MODEL_LABEL, "operator": "In", "values": wanted}]}
            extra["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [term]}}}
    pod = default_pod(name, namespace="trace", **extra)
    container = pod["spec"]["containers"][0]
    del container["ports"]
    container["resources"] = {"requests": requests, "limits": dict(requests)}
    return pod


def _gpu_trace(nodes: int, init_pods: int, pods: int, affinity_share: float) -> Workload:
    node_objs = _gpu_trace_nodes(nodes)
    rng = random.Random(GPU_TRACE_SEED)
    models = [shape[4] for shape in GPU_TRACE_NODE_SHAPES if shape[4]]
    model_rng = random.Random(GPU_TRACE_SEED + 1)
    every = [_gpu_trace_pod(f"pod-{i}", rng, models, affinity_share, model_rng) for i in range(init_pods + pods)]
    init = every[:init_pods]
    for i, pod in enumerate(init):  # running pods spread round robin, as scheduler_perf's init pods
        pod["metadata"]["name"] = pod["metadata"]["uid"] = f"init-{i}"
        pod["spec"]["nodeName"] = node_objs[i % nodes]["metadata"]["name"]
    return Workload(node_objs, init, every[init_pods:], settle=True)


def gpu_trace(nodes: int, init_pods: int, pods: int) -> Workload:
    """AlibabaGPUTrace: a heterogeneous GPU cluster shaped like Alibaba's public trace
    (cluster-trace-gpu-v2023: 1523 nodes of 14 shapes, seven GPU models, GPU nodes tainted),
    and its pods in arrival order, CPU-only or asking for 1-8 GPUs; more GPUs are asked for than
    the cluster has, and some pods fit nowhere."""
    return _gpu_trace(nodes, init_pods, pods, 0.0)


def gpu_trace_affinity(nodes: int, init_pods: int, pods: int) -> Workload:
    """AlibabaGPUTraceGpuspec33: gpu-trace's nodes and pods, a third of the GPU pods requiring
    one or two GPU models through required node affinity."""
    return _gpu_trace(nodes, init_pods, pods, 1 / 3)


GPU_TRACE_REPLICA_SETS = 400
GPU_TRACE_STORAGE_CLASS = "standard"


def _gpu_trace_replica_set(app: str, replicas: int) -> Obj:
    """Its replicas are its pods in the workload, so that no controller (simulate's) adds any."""
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": app, "namespace": "trace", "uid": f"trace-rs-{app}"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": app}},
                     "template": {"metadata": {"labels": {"app": app}}}}}


def _gpu_trace_claim(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "trace", "uid": f"trace-pvc-{name}"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": GPU_TRACE_STORAGE_CLASS,
                     "resources": {"requests": {"storage": "10Gi"}}},
            "status": {"phase": "Pending"}}


def _with_workload_inputs(pod: Obj, app: str, draw: float, objects: list[Obj]) -> None:
    """Give a trace pod what a Deployment's pod of a real cluster carries: its ReplicaSet as
    owner (so the system default spread constraints apply to it) and, by `draw`, one of
    required or preferred pod anti-affinity by hostname, required pod affinity by zone, a zone
    spread constraint (ScheduleAnyway or DoNotSchedule), or a claim of a WaitForFirstConsumer
    class that the provisioner fills."""
    meta, spec = pod["metadata"], pod["spec"]
    meta["labels"] = {"app": app}
    meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": app,
                                "uid": f"trace-rs-{app}", "controller": True}]
    own = {"labelSelector": {"matchLabels": {"app": app}}}
    hostname = "kubernetes.io/hostname"
    zone = "topology.kubernetes.io/zone"
    affinity = spec.setdefault("affinity", {})
    if draw < 0.10:
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            {**own, "topologyKey": hostname}]}
    elif draw < 0.25:
        affinity["podAntiAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": {**own, "topologyKey": hostname}}]}
    elif draw < 0.30:
        affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            {**own, "topologyKey": zone}]}
    elif draw < 0.40:
        spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": zone,
                                              "whenUnsatisfiable": "ScheduleAnyway", **own}]
    elif draw < 0.45:
        spec["topologySpreadConstraints"] = [{"maxSkew": 2, "topologyKey": zone,
                                              "whenUnsatisfiable": "DoNotSchedule", **own}]
    elif draw < 0.60:
        claim = _gpu_trace_claim(f"data-{meta['name']}")
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]}}]
        objects.append(claim)
    if not affinity:
        del spec["affinity"]


def gpu_trace_workloads(nodes: int, init_pods: int, pods: int) -> Workload:
    """AlibabaGPUTraceWorkloads: gpu-trace-affinity's nodes in three zones, its pods the
    replicas of 400 ReplicaSets, each carrying the inputs of a real cluster's pods (see
    _with_workload_inputs): the common inputs of every default plugin at once."""
    workload = _gpu_trace(nodes, init_pods, pods, 1 / 3)
    for i, node in enumerate(workload.nodes):
        node["metadata"]["labels"]["topology.kubernetes.io/zone"] = ZONES[i % len(ZONES)]
    rng = random.Random(GPU_TRACE_SEED + 2)
    objects: list[Obj] = [{"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                           "metadata": {"name": GPU_TRACE_STORAGE_CLASS}, "provisioner": "ebs.csi.aws.com",
                           "volumeBindingMode": "WaitForFirstConsumer"}]
    replicas = [0] * GPU_TRACE_REPLICA_SETS
    for pod in workload.init_pods + workload.pods:
        app, draw = rng.randrange(GPU_TRACE_REPLICA_SETS), rng.random()
        replicas[app] += 1
        _with_workload_inputs(pod, f"app-{app}", draw, objects)
    workload.objects = [_gpu_trace_replica_set(f"app-{a}", n) for a, n in enumerate(replicas)] + objects
    return workload


WORKLOADS: dict[str, Callable[[int, int, int], Workload]] = {
    "basic": basic,
    "pod-anti-affinity": pod_anti_affinity,
    "topology-spread": topology_spread,
    "preemption": preemption,
    "preemption-async": preemption_async,
    "unschedulable": unschedulable,
    "dra": dra,
    "gpu-trace": gpu_trace,
    "gpu-trace-affinity": gpu_trace_affinity,
    "gpu-trace-workloads": gpu_trace_workloads,
}

DEFAULT_SIZE = (500, 500, 2000)
"""(nodes, init pods, measured pods) when the command line gives none."""

SIZES: dict[str, tuple[int, int, int]] = {
    # Every pod repels every other by hostname: DEFAULT_SIZE's 500 init pods would fill the
    # 500 nodes and leave every measured pod pending.
    "pod-anti-affinity": (500, 100, 400),
    "preemption-async": (5000, 20000, 5000),
    "unschedulable": (5000, 20000, 10000),
    "dra": (500, 2500, 2500),
    "gpu-trace": (1523, 0, 8000),
    "gpu-trace-affinity": (1523, 0, 8000),
    "gpu-trace-workloads": (1523, 0, 8000),
}
"""Workloads whose own size is scheduler_perf's performance case rather than DEFAULT_SIZE."""

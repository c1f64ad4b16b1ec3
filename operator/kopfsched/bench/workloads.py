"""Benchmark workloads, shaped like upstream's scheduler_perf test cases.

Each workload returns the nodes, the pods already running on them (bound directly, as
scheduler_perf's initial pods), and the pods to schedule while measuring.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]
ZONES = ("zone-a", "zone-b", "zone-c")


@dataclass
class Workload:
    nodes: list[Obj]
    init_pods: list[Obj]
    pods: list[Obj]


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


def preemption(nodes: int, init_pods: int, pods: int) -> Workload:
    """PreemptionBasic (scheduler_perf's 1000Nodes: 4000 init pods, 1000 measured; keep 4 init pods
    per node): nodes full of priority-0 pods of 900m (pod-low-priority.yaml: four use 3.6 of 4 CPU),
    then priority-10 pods of 3 CPU (pod-high-priority.yaml) that each must preempt three of them."""
    node_objs = [default_node(i) for i in range(nodes)]
    init = []
    for i in range(init_pods):
        pod = default_pod(f"init-{i}", namespace="sched-setup", node_name=f"node-{i % nodes}", cpu="900m",
                          terminationGracePeriodSeconds=0)
        pod["status"] = {"phase": "Running"}
        init.append(pod)
    return Workload(node_objs, init, [default_pod(f"pod-{i}", cpu="3", priority=10) for i in range(pods)])


WORKLOADS: dict[str, Callable[[int, int, int], Workload]] = {
    "basic": basic,
    "pod-anti-affinity": pod_anti_affinity,
    "topology-spread": topology_spread,
    "preemption": preemption,
}

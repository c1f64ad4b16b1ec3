"""Random clusters for the differential tests (hypothesis strategies).

Small on purpose: a handful of nodes over three zones, a few running pods and a few pending
ones, drawn from small pools of labels, keys and quantities, so that the default plugins'
interesting cases (a tie, a skew of exactly maxSkew, a taint with and without its toleration,
an affinity term that matches one pod) come up often and shrink to a readable cluster.

Families drawn now and then, each in a third of the clusters or so: storage (`storage`, with
CSIDriver capacity tracking and CSIStorageCapacity per zone), DRA (`device_pool`: classes,
slices, claims and templates, claims held by running pods), in-place resize statuses of running
pods (`resize_status`). Inputs of v1.37 features kopfsched does not implement
(docs/feature-gates.md) are never drawn, each family's docstring says which.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

ZONES = ("zone-a", "zone-b", "zone-c")
APPS = ("web", "db", "cache")
NAMESPACES = ("default", "team-a")
TAINTS = (("dedicated", "infra"), ("gpu", "true"), ("spot", ""))
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
ZONE_KEY = "topology.kubernetes.io/zone"
HOST_KEY = "kubernetes.io/hostname"
GPU = "example.com/gpu"
CSI_DRIVER = "csi.example.com"

PRIORITY_CLASSES = (
    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "batch"},
     "value": 100, "globalDefault": True},
    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "critical"},
     "value": 1000},
    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "polite"},
     "value": 1000, "preemptionPolicy": "Never"},
)
"""With a global default: a pod without a priority or a class gets 100."""

SCORE_PLUGINS = ("NodeResourcesFit", "NodeResourcesBalancedAllocation", "ImageLocality", "InterPodAffinity",
                 "NodeAffinity", "PodTopologySpread", "TaintToleration")

cpu = st.sampled_from(["100m", "250m", "500m", "1", "1500m", "2"])
memory = st.sampled_from(["64Mi", "256Mi", "512Mi", "1Gi", "2Gi"])


@st.composite
def node(draw: st.DrawFn, name: str) -> dict[str, Any]:
    labels = {HOST_KEY: name, "disk": draw(st.sampled_from(["ssd", "hdd"]))}
    if draw(st.integers(0, 5)):  # now and then a node without a zone (spread's missing labels)
        labels[ZONE_KEY] = draw(st.sampled_from(ZONES))
    allocatable = {"cpu": draw(st.sampled_from(["1", "2", "4", "8"])),
                   "memory": draw(st.sampled_from(["1Gi", "2Gi", "4Gi", "8Gi"])),
                   "pods": draw(st.sampled_from(["3", "10", "110"]))}
    if draw(st.booleans()):
        allocatable[GPU] = draw(st.sampled_from(["1", "2", "0"]))  # 0: advertised, none offered
    taints = [{"key": key, "value": value, "effect": draw(st.sampled_from(EFFECTS))}
              for key, value in draw(st.lists(st.sampled_from(TAINTS), max_size=2, unique=True))]
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if draw(st.integers(0, 9)) == 0:
        spec["unschedulable"] = True
    status: dict[str, Any] = {"allocatable": allocatable, "capacity": dict(allocatable)}
    images = draw(st.lists(st.sampled_from(["nginx:1.27", "redis:7", "postgres:16"]), max_size=2, unique=True))
    if images:
        status["images"] = [{"names": [image], "sizeBytes": draw(st.sampled_from([30, 300, 900])) * 2**20}
                            for image in images]
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "spec": spec, "status": status}


def _selector(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.booleans()):
        return {"matchLabels": {"app": draw(st.sampled_from(APPS))}}
    return {"matchExpressions": [{"key": "app", "operator": draw(st.sampled_from(["In", "NotIn"])),
                                  "values": draw(st.lists(st.sampled_from(APPS), min_size=1, max_size=2,
                                                          unique=True))}]}


def _affinity_term(draw: st.DrawFn) -> dict[str, Any]:
    term: dict[str, Any] = {"labelSelector": _selector(draw),
                            "topologyKey": draw(st.sampled_from([ZONE_KEY, HOST_KEY]))}
    scope = draw(st.integers(0, 3))
    if scope == 1:
        term["namespaces"] = draw(st.lists(st.sampled_from(NAMESPACES), min_size=1, unique=True))
    elif scope == 2:
        term["namespaceSelector"] = draw(st.sampled_from([{}, {"matchLabels": {"team": "a"}}]))
    if draw(st.integers(0, 4)) == 0:
        term["matchLabelKeys"] = ["tier"]
    return term


def _node_affinity(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {}
    expr = {"key": draw(st.sampled_from([ZONE_KEY, "disk"])), "operator": draw(st.sampled_from(["In", "NotIn",
                                                                                                  "Exists"]))}
    if expr["operator"] != "Exists":
        expr["values"] = [draw(st.sampled_from(ZONES if expr["key"] == ZONE_KEY else ("ssd", "hdd")))]
    if draw(st.booleans()):
        out["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [{"matchExpressions": [expr]}]}
    else:
        out["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": draw(st.sampled_from([1, 50, 100])), "preference": {"matchExpressions": [expr]}}]
    return out


def _containers(draw: st.DrawFn, prefix: str, count: int, *, sidecar: bool = False) -> list[dict[str, Any]]:
    out = []
    for i in range(count):
        resources: dict[str, Any] = {}
        shape = draw(st.integers(0, 4))
        if shape in (1, 2, 3):
            resources["requests"] = {"cpu": draw(cpu), "memory": draw(memory)}
        if shape == 3 and draw(st.booleans()):
            resources["requests"][GPU] = "1"
        if shape == 4:  # limits only: the API server makes them the requests
            resources["limits"] = {"cpu": draw(cpu)}
        container: dict[str, Any] = {"name": f"{prefix}{i}", "image": draw(st.sampled_from(
            ["nginx:1.27", "redis:7", "postgres:16", "busybox"])), "resources": resources}
        if sidecar and draw(st.booleans()):
            container["restartPolicy"] = "Always"
        out.append(container)
    return out


@st.composite
def pod(draw: st.DrawFn, name: str, *, pending: bool, claims: dict[str, list[str]] | None = None) -> dict[str, Any]:
    labels = {"app": draw(st.sampled_from(APPS)), "tier": draw(st.sampled_from(["front", "back"]))}
    spec: dict[str, Any] = {"containers": _containers(draw, "c", draw(st.integers(1, 2)))}
    namespace = draw(st.sampled_from(NAMESPACES))
    if claims is not None and claims.get(namespace) and draw(st.booleans()):
        # Claims of the pod's namespace, now and then one that does not exist.
        names = draw(st.lists(st.sampled_from([*claims[namespace], *claims[namespace], "missing"]), min_size=1,
                              max_size=2, unique=True))
        spec["volumes"] = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": claim}}
                           for i, claim in enumerate(names)]
    if draw(st.integers(0, 3)) == 0:
        spec["initContainers"] = _containers(draw, "init", draw(st.integers(1, 2)), sidecar=True)
    if draw(st.integers(0, 6)) == 0:
        # Pod-level requests, valid only at or above the containers' own: here the only ones.
        spec["resources"] = {"requests": {"cpu": draw(cpu), "memory": draw(memory)}}
        for container in spec["containers"] + spec.get("initContainers", []):
            container["resources"] = {}
    how = draw(st.integers(0, 3))
    if how in (1, 2):
        spec["priority"] = draw(st.sampled_from([0, 100, 1000]))
    elif how == 3:  # admission sets the priority (and preemptionPolicy) from the class
        spec["priorityClassName"] = draw(st.sampled_from([c["metadata"]["name"] for c in PRIORITY_CLASSES]))
    if pending:
        if draw(st.integers(0, 7)) == 0:
            spec["schedulingGates"] = [{"name": "example.com/quota"}]
        if draw(st.integers(0, 4)) == 0:
            spec["preemptionPolicy"] = "Never"
        tolerations = []
        for key, value in draw(st.lists(st.sampled_from(TAINTS), max_size=2, unique=True)):
            toleration: dict[str, Any] = {"key": key}
            if draw(st.booleans()):
                toleration.update(operator="Equal", value=value)
            else:
                toleration["operator"] = "Exists"
            if draw(st.booleans()):
                toleration["effect"] = draw(st.sampled_from(EFFECTS))
            tolerations.append(toleration)
        if tolerations:
            spec["tolerations"] = tolerations
        if draw(st.integers(0, 4)) == 0:
            spec["nodeSelector"] = {"disk": draw(st.sampled_from(["ssd", "hdd"]))}
        affinity: dict[str, Any] = {}
        if draw(st.integers(0, 2)) == 0:
            affinity["nodeAffinity"] = _node_affinity(draw)
        for kind in ("podAffinity", "podAntiAffinity"):
            if draw(st.integers(0, 3)) == 0:
                if draw(st.booleans()):
                    affinity[kind] = {"requiredDuringSchedulingIgnoredDuringExecution": [_affinity_term(draw)]}
                else:
                    affinity[kind] = {"preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": draw(st.sampled_from([1, 10, 100])), "podAffinityTerm": _affinity_term(draw)}]}
        if affinity:
            spec["affinity"] = affinity
        if draw(st.integers(0, 2)) == 0:
            spec["topologySpreadConstraints"] = [_spread(draw, labels)]
    if draw(st.integers(0, 4)) == 0:
        ports = {(p["hostPort"], p.get("protocol", "TCP"), p.get("hostIP")): p  # TCP: the server's default
                 for p in (_host_port(draw) for _ in range(draw(st.integers(1, 2))))}
        spec["containers"][0]["ports"] = list(ports.values())  # the API server rejects duplicates
    meta = {"name": name, "namespace": namespace, "labels": labels}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _host_port(draw: st.DrawFn) -> dict[str, Any]:
    """NodePorts' inputs: a port, its protocol and host IP (0.0.0.0 conflicts with every IP)."""
    port = draw(st.sampled_from([80, 8080]))
    out: dict[str, Any] = {"containerPort": port, "hostPort": port}
    if draw(st.integers(0, 2)) == 0:
        out["protocol"] = draw(st.sampled_from(["TCP", "UDP"]))
    if draw(st.integers(0, 2)) == 0:
        out["hostIP"] = draw(st.sampled_from(["0.0.0.0", "10.0.0.1", "10.0.0.2"]))
    return out


def _spread(draw: st.DrawFn, labels: dict[str, str]) -> dict[str, Any]:
    constraint: dict[str, Any] = {
        "maxSkew": draw(st.sampled_from([1, 2])),
        "topologyKey": draw(st.sampled_from([ZONE_KEY, HOST_KEY])),
        "whenUnsatisfiable": draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"])),
        "labelSelector": {"matchLabels": {"app": labels["app"]}},
    }
    if constraint["whenUnsatisfiable"] == "DoNotSchedule" and draw(st.integers(0, 3)) == 0:
        constraint["minDomains"] = draw(st.sampled_from([2, 4]))
    if draw(st.integers(0, 3)) == 0:
        constraint["nodeAffinityPolicy"] = draw(st.sampled_from(["Honor", "Ignore"]))
    if draw(st.integers(0, 3)) == 0:
        constraint["nodeTaintsPolicy"] = draw(st.sampled_from(["Honor", "Ignore"]))
    if draw(st.integers(0, 3)) == 0:
        constraint["matchLabelKeys"] = ["tier"]
    return constraint


@st.composite
def disruption_budget(draw: st.DrawFn, name: str) -> dict[str, Any]:
    """What preemption reads of a PDB: its selector and status (the disruption controller's)."""
    status: dict[str, Any] = {"disruptionsAllowed": draw(st.sampled_from([0, 1])),
                              "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}
    if draw(st.integers(0, 3)) == 0:
        status["disruptedPods"] = {f"run-{draw(st.integers(0, 3))}": "2026-01-01T00:00:00Z"}
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": draw(st.sampled_from(NAMESPACES))},
            "spec": {"selector": _selector(draw), "maxUnavailable": 1}, "status": status}


@st.composite
def scheduler_configuration(draw: st.DrawFn) -> dict[str, Any]:
    """A KubeSchedulerConfiguration whose default-scheduler profile changes a few of the
    default plugins' args and weights, or turns plugins off, as users tune them."""
    profile: dict[str, Any] = {"schedulerName": "default-scheduler"}
    score_enabled = [{"name": name, "weight": draw(st.sampled_from([1, 3, 5]))}
                     for name in draw(st.lists(st.sampled_from(SCORE_PLUGINS), max_size=2, unique=True))]
    score_disabled = [{"name": name} for name in draw(st.lists(st.sampled_from(SCORE_PLUGINS), max_size=1))
                      if name not in {e["name"] for e in score_enabled}]
    plugins: dict[str, Any] = {}
    if score_enabled or score_disabled:
        plugins["score"] = {k: v for k, v in (("enabled", score_enabled), ("disabled", score_disabled)) if v}
    if draw(st.integers(0, 5)) == 0:
        plugins["postFilter"] = {"disabled": [{"name": "DefaultPreemption"}]}
    if plugins:
        profile["plugins"] = plugins
    config: list[dict[str, Any]] = []
    if draw(st.booleans()):
        kind = draw(st.sampled_from(["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"]))
        strategy: dict[str, Any] = {"type": kind, "resources": [
            {"name": "cpu", "weight": draw(st.sampled_from([1, 2]))},
            {"name": "memory", "weight": 1}, *([{"name": GPU, "weight": 3}] if draw(st.booleans()) else [])]}
        if kind == "RequestedToCapacityRatio":
            strategy["requestedToCapacityRatio"] = {"shape": draw(st.sampled_from([
                [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}],
                [{"utilization": 0, "score": 10}, {"utilization": 50, "score": 3}, {"utilization": 100, "score": 0}],
            ]))}
        config.append({"name": "NodeResourcesFit", "args": {"scoringStrategy": strategy}})
    if draw(st.integers(0, 2)) == 0:
        config.append({"name": "NodeResourcesBalancedAllocation", "args": {"resources": [
            {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1},
            *([{"name": GPU, "weight": 1}] if draw(st.booleans()) else [])]}})
    if draw(st.integers(0, 2)) == 0:
        config.append({"name": "InterPodAffinity", "args": {
            "hardPodAffinityWeight": draw(st.sampled_from([0, 1, 10])),
            "ignorePreferredTermsOfExistingPods": draw(st.booleans())}})
    if draw(st.integers(0, 2)) == 0:
        args: dict[str, Any] = {"defaultingType": "List"}
        if draw(st.booleans()):
            args["defaultConstraints"] = [{"maxSkew": draw(st.sampled_from([1, 2])), "topologyKey": ZONE_KEY,
                                           "whenUnsatisfiable": draw(st.sampled_from(
                                               ["DoNotSchedule", "ScheduleAnyway"]))}]
        config.append({"name": "PodTopologySpread", "args": args})
    if draw(st.integers(0, 3)) == 0:
        config.append({"name": "DefaultPreemption", "args": {"minCandidateNodesPercentage": 0,
                                                             "minCandidateNodesAbsolute": 1}})
    if draw(st.integers(0, 3)) == 0:
        config.append({"name": "NodeAffinity", "args": {"addedAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 20, "preference": {"matchExpressions": [
                    {"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}}})
    if config:
        profile["pluginConfig"] = config
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "profiles": [profile]}


STORAGE_CLASSES = (
    {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "wait"},
     "provisioner": CSI_DRIVER, "volumeBindingMode": "WaitForFirstConsumer"},
    {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local"},
     "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"},
    {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "now"},
     "provisioner": CSI_DRIVER, "volumeBindingMode": "Immediate"},
)


@st.composite
def storage(draw: st.DrawFn, nodes: list[dict[str, Any]], *,
            capacity: bool = True) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """The volume plugins' inputs: StorageClasses (WaitForFirstConsumer with and without a
    provisioner, Immediate), PVs with zone affinity or zone labels, PVCs bound or not (ReadWriteOncePod
    now and then), the CSIDriver with its capacity tracking on or off and CSIStorageCapacity per
    zone, CSINodes with attach limits. Returns (objects, claim names per namespace)."""
    volumes: list[dict[str, Any]] = []
    for i in range(draw(st.integers(0, 3))):
        zone = draw(st.sampled_from(ZONES))
        spec: dict[str, Any] = {"capacity": {"storage": draw(st.sampled_from(["1Gi", "5Gi"]))},
                                "accessModes": ["ReadWriteOnce"],
                                "storageClassName": draw(st.sampled_from(["local", "wait"])),
                                "csi": {"driver": CSI_DRIVER, "volumeHandle": f"pv-{i}"},
                                "persistentVolumeReclaimPolicy": "Retain"}
        if draw(st.booleans()):
            spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": ZONE_KEY, "operator": "In", "values": [zone]}]}]}}
        meta: dict[str, Any] = {"name": f"pv-{i}"}
        if draw(st.integers(0, 2)) == 0:
            meta["labels"] = {ZONE_KEY: zone}  # VolumeZone's input
        volumes.append({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": spec,
                        "status": {"phase": "Available"}})
    claims: dict[str, list[str]] = {}
    objects: list[dict[str, Any]] = [*STORAGE_CLASSES]
    free = list(volumes)
    per_namespace = [(namespace, j) for namespace in NAMESPACES for j in range(draw(st.integers(0, 2)))]
    for i, (namespace, _) in enumerate(per_namespace):
        name = f"claim-{i}"
        spec = {"accessModes": [draw(st.sampled_from(["ReadWriteOnce", "ReadWriteOnce", "ReadWriteOncePod"]))],
                "resources": {"requests": {"storage": draw(st.sampled_from(["1Gi", "1Gi", "4Gi"]))}},
                "storageClassName": draw(st.sampled_from(["wait", "wait", "local", "now"]))}
        status: dict[str, Any] = {"phase": "Pending"}
        matching = [v for v in free if v["spec"]["storageClassName"] == spec["storageClassName"]]
        if matching and draw(st.booleans()):
            volume = draw(st.sampled_from(matching))
            free.remove(volume)
            spec["volumeName"] = volume["metadata"]["name"]
            status = {"phase": "Bound", "accessModes": spec["accessModes"],
                      "capacity": volume["spec"]["capacity"]}
            volume["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": namespace, "name": name}
            volume["status"] = {"phase": "Bound"}
        objects.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                        "metadata": {"name": name, "namespace": namespace}, "spec": spec, "status": status})
        claims.setdefault(namespace, []).append(name)
    if capacity:
        objects += draw(storage_capacity())
    for node_obj in nodes:
        if draw(st.booleans()):
            name = node_obj["metadata"]["name"]
            objects.append({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": name},
                            "spec": {"drivers": [{"name": CSI_DRIVER, "nodeID": name,
                                                  "allocatable": {"count": draw(st.sampled_from([1, 2]))}}]}})
    return volumes + objects, claims


RESIZE_CONDITIONS = (
    {"type": "PodResizePending", "status": "True", "reason": "Deferred",
     "message": "Node didn't have enough capacity: cpu, requested: 2000, capacity: 1000"},
    {"type": "PodResizePending", "status": "True", "reason": "Infeasible",
     "message": "Node didn't have enough capacity: cpu, requested: 8000, capacity: 4000"},
    {"type": "PodResizeInProgress", "status": "True"},
)


def _allocated(draw: st.DrawFn, requests: dict[str, Any]) -> dict[str, Any]:
    """What the kubelet allocated: the requests, now and then another cpu or memory."""
    allocated = dict(requests)
    if draw(st.booleans()):
        allocated.update(cpu=draw(cpu))
    if draw(st.integers(0, 2)) == 0:
        allocated.update(memory=draw(memory))
    return allocated


def _resize_conditions(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Now and then one of RESIZE_CONDITIONS, as the kubelet writes it."""
    return [{**c, "lastTransitionTime": "2025-12-31T00:01:00Z"}
            for c in draw(st.lists(st.sampled_from(RESIZE_CONDITIONS), max_size=1))]


@st.composite
def _pod_level_resize_status(draw: st.DrawFn, requests: dict[str, Any]) -> dict[str, Any]:
    """A pod-level resize: what the kubelet allocated to the pod and what it runs with, each
    the spec's requests or another cpu or memory, now and then a resize condition."""
    status: dict[str, Any] = {}
    if draw(st.integers(0, 2)):
        status["allocatedResources"] = _allocated(draw, requests)
    if draw(st.integers(0, 2)):
        actual = dict(status.get("allocatedResources") or requests)
        if draw(st.booleans()):
            actual.update(cpu=draw(cpu))
        status["resources"] = {"requests": actual}
    conditions = _resize_conditions(draw)
    if conditions:
        status["conditions"] = conditions
    return status


@st.composite
def resize_status(draw: st.DrawFn, running: dict[str, Any]) -> dict[str, Any]:
    """A running pod's status as the kubelet writes it around an in-place resize: per
    container what it allocated and what the container runs with (either may differ from the
    spec, which the user changed), now and then a resize condition (Deferred, Infeasible: the
    scheduler then counts what runs, not the spec; InProgress) and the old, ignored
    status.resize. A pod with pod-level requests gets pod-level status.resources and
    status.allocatedResources instead (InPlacePodLevelResourcesVerticalScaling). Sidecar
    (restartable init) containers get statuses too, as v1.37 reads them."""
    spec = running["spec"]
    if spec.get("resources"):
        return draw(_pod_level_resize_status(spec["resources"]["requests"]))

    def container_status(container: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"name": container["name"], "image": container["image"], "imageID": "",
                               "ready": True, "restartCount": 0, "started": True,
                               "state": {"running": {"startedAt": "2025-12-31T00:00:00Z"}}}
        requests = (container.get("resources") or {}).get("requests") or {}
        if draw(st.integers(0, 3)):
            allocated = _allocated(draw, requests)
            if allocated:  # never an empty map: the API server stores none
                out["allocatedResources"] = allocated
        if draw(st.integers(0, 3)):
            actual = dict(out.get("allocatedResources") or requests)
            if draw(st.integers(0, 2)) == 0:
                actual.update(cpu=draw(cpu))
            out["resources"] = {"requests": actual} if actual else {}
        return out

    status: dict[str, Any] = {"containerStatuses": [container_status(c) for c in spec["containers"]]}
    sidecars = [c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"]
    if sidecars:
        status["initContainerStatuses"] = [container_status(c) for c in sidecars]
    conditions = _resize_conditions(draw)
    if conditions:
        status["conditions"] = conditions
    if draw(st.integers(0, 5)) == 0:
        status["resize"] = draw(st.sampled_from(["Proposed", "InProgress", "Deferred", "Infeasible"]))
    return status


@st.composite
def storage_capacity(draw: st.DrawFn) -> list[dict[str, Any]]:
    """The driver of the WaitForFirstConsumer class `wait` as a CSIDriver (capacity tracking on
    or off, or no CSIDriver at all: then VolumeBinding checks no capacity) and what it publishes
    of its capacity: a CSIStorageCapacity per zone now and then (room for none, one or several of
    the claims' sizes, a maximumVolumeSize below the capacity), or none (no room anywhere when
    tracking is on). The other classes have no capacity objects (`local` has no provisioner)."""
    out: list[dict[str, Any]] = []
    tracking = draw(st.integers(0, 3))  # no CSIDriver, tracking off, on (twice as often)
    if tracking == 0:
        return out
    out.append({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": CSI_DRIVER},
                "spec": {"attachRequired": True, "storageCapacity": tracking >= 2}})
    for zone in draw(st.lists(st.sampled_from(ZONES), max_size=3, unique=True)):
        capacity: dict[str, Any] = {
            "apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
            "metadata": {"name": f"capacity-{zone}", "namespace": "default"},
            "storageClassName": draw(st.sampled_from(["wait", "wait", "now"])),
            "nodeTopology": {"matchLabels": {ZONE_KEY: zone}},
            "capacity": draw(st.sampled_from(["0", "1Gi", "3Gi", "10Gi"]))}
        if draw(st.integers(0, 3)) == 0:
            capacity["maximumVolumeSize"] = draw(st.sampled_from(["1Gi", "2Gi"]))
        out.append(capacity)
    return out


GPU_DRIVER = "gpu.example.com"
NIC_DRIVER = "nic.example.com"
ADMIN_NAMESPACE = "team-a"
"""Labelled resource.kubernetes.io/admin-access=true: the API server accepts adminAccess
requests only in such a namespace, so only claims and templates there ask for it."""

DEVICE_CLASSES = (
    {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
     "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GPU_DRIVER}"'}}]}},
    {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "big-gpu"},
     "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GPU_DRIVER}"'}},
                            {"cel": {"expression": f'device.capacity["{GPU_DRIVER}"].memory'
                                                   '.compareTo(quantity("80Gi")) >= 0'}}]}},
    {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "nic"},
     "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{NIC_DRIVER}"'}}]}},
)
"""device_classes() gives some of them an extendedResourceName."""

REQUEST_SELECTORS = {
    "gpu": (f'device.attributes["{GPU_DRIVER}"].model == "H100"',
            f'device.attributes["{GPU_DRIVER}"].numa == 1',
            f'device.capacity["{GPU_DRIVER}"].memory.compareTo(quantity("40Gi")) > 0'),
    "nic": (f'device.attributes["{NIC_DRIVER}"].speed >= 100',),
}
"""Per class family, selectors that every device of that family can evaluate (no runtime
errors: each device has these attributes and capacity)."""


def _gpu_device(draw: st.DrawFn, name: str) -> dict[str, Any]:
    out = {"name": name,
           "attributes": {"model": {"string": draw(st.sampled_from(["A100", "H100"]))},
                          "numa": {"int": draw(st.sampled_from([0, 1]))}},
           "capacity": {"memory": {"value": draw(st.sampled_from(["40Gi", "80Gi"]))}}}
    if draw(st.integers(0, 5)) == 0:  # attached by a controller before use (DRADeviceBindingConditions)
        out.update(bindingConditions=[BINDING], bindingFailureConditions=[BINDING_FAILED],
                   bindsToNode=draw(st.booleans()))
    return out


@st.composite
def device_inventory(draw: st.DrawFn, nodes: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """DeviceClasses and the drivers' ResourceSlices: per node now and then a slice of 0-3
    node-local GPUs (model, NUMA node, memory), its pool now and then incomplete (it says two
    slices, one is published); and now and then network-attached NICs reaching one zone's nodes
    (nodeSelector) or every node (allNodes). Returns (objects, GPU device names per node).

    Partitionable and shared devices are partitioned_inventory's. Left out on purpose: device
    taints, which test_device_taints.py draws. Now and then a GPU has binding conditions."""
    objects: list[dict[str, Any]] = [*draw(device_classes())]
    gpus: dict[str, list[str]] = {}
    for node_obj in nodes:
        if draw(st.integers(0, 2)) == 0:
            continue
        name = node_obj["metadata"]["name"]
        devices = [_gpu_device(draw, f"gpu-{i}") for i in range(draw(st.sampled_from([1, 2, 3, 0])))]
        slice_count = 2 if draw(st.integers(0, 7)) == 0 else 1
        objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                        "metadata": {"name": f"{name}-{GPU_DRIVER}"},
                        "spec": {"driver": GPU_DRIVER, "nodeName": name, "devices": devices,
                                 "pool": {"name": name, "generation": 1, "resourceSliceCount": slice_count}}})
        if slice_count == 1:
            gpus[name] = [d["name"] for d in devices]
    if draw(st.booleans()):
        zone = draw(st.sampled_from([None, *ZONES]))
        pool = f"nic-{zone or 'all'}"
        spec: dict[str, Any] = {"driver": NIC_DRIVER, "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
                                "devices": [{"name": f"nic-{i}", "attributes": {"speed": {"int": draw(
                                    st.sampled_from([10, 100]))}}} for i in range(draw(st.integers(1, 2)))]}
        if zone is None:
            spec["allNodes"] = True
        else:
            spec["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": ZONE_KEY, "operator": "In", "values": [zone]}]}]}
        objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": pool},
                        "spec": spec})
    return objects, gpus


MIG_DRIVER = "mig.example.com"
VNIC_DRIVER = "vnic.example.com"
PARTITION_CLASSES = (
    {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "mig"},
     "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{MIG_DRIVER}"'}}]}},
    {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "vnic"},
     "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{VNIC_DRIVER}"'}}]}},
)
PARTITIONS = (("full", "40Gi", 4), ("half-0", "20Gi", 2), ("half-1", "20Gi", 2), ("quarter-0", "10Gi", 1),
              ("quarter-1", "10Gi", 1), ("quarter-2", "10Gi", 1))
"""MIG-style partitions of one GPU: (name, memory, slices) each consumes of the counter set."""
BANDWIDTH_POLICIES = (
    None,
    {"default": "1G", "validRange": {"min": "1G", "step": "1G", "max": "10G"}},
    {"default": "1G", "validRange": {"min": "1G", "step": "500M", "max": "6G"}},
    {"default": "500m", "validRange": {"min": "250m", "step": "250m"}},
    {"default": "1G", "validValues": ["1G", "2G", "5G"]},
)
"""requestPolicy of a shared NIC's bandwidth (the third in milli-units: fractional ranges)."""
CAPACITY_REQUESTS = {"vnic": ("bandwidth", ("300m", "1G", "1500M", "2G", "3G", "7G", "11G")),
                     "gpu": ("memory", ("40Gi", "60Gi")), "mig": ("memory", ("10Gi",))}
"""Per class, the capacity a request may ask for and the amounts drawn."""


def _partition(name: str, memory: str, slices: int, counter_set: str, card: int) -> dict[str, Any]:
    return {"name": name, "attributes": {"profile": {"string": name.split("-")[0]}, "card": {"int": card}},
            "capacity": {"memory": {"value": memory}},
            "consumesCounters": [{"counterSet": counter_set, "counters": {
                "memory": {"value": memory}, "slices": {"value": str(slices)}}}]}


def _counter_slice(name: str, pool: str, counter_set: str, memory: str, slices: int,
                   where: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": MIG_DRIVER, "pool": {"name": pool, "generation": 1, "resourceSliceCount": 2}, **where,
                     "sharedCounters": [{"name": counter_set, "counters": {
                         "memory": {"value": memory}, "slices": {"value": str(slices)}}}]}}


@st.composite
def partitioned_inventory(draw: st.DrawFn, nodes: list[dict[str, Any]]) -> tuple[
        list[dict[str, Any]], dict[str, list[str]], dict[str, list[str]]]:
    """Partitionable and shared devices (DRAPartitionableDevices, DRAConsumableCapacity, beta
    and on in v1.37): per node now and then a pool of MIG-style partitions of one GPU, whose
    counter set (a second slice, sharedCounters) holds a whole GPU or less, so that counters run
    out (now and then its first partition is shared, allowMultipleAllocations, and pays its
    counters once); now and then one pool with perDeviceNodeSelection, its partitions each reaching one
    node, a zone or every node; per node now and then shared NICs (allowMultipleAllocations)
    with a bandwidth capacity and a request policy. Returns (objects, partitions per node,
    shared NICs per node)."""
    objects: list[dict[str, Any]] = [*PARTITION_CLASSES]
    partitions: dict[str, list[str]] = {}
    nics: dict[str, list[str]] = {}
    for node_obj in nodes:
        name = node_obj["metadata"]["name"]
        if draw(st.integers(0, 2)):
            chosen = draw(st.lists(st.sampled_from(PARTITIONS), min_size=1, max_size=4, unique=True))
            chosen.sort(key=PARTITIONS.index)
            counter_set = "gpu-0" if draw(st.integers(0, 9)) else "gpu-1"  # now and then one that is missing
            devices = [_partition(p, memory, slices, counter_set, i) for i, (p, memory, slices) in enumerate(chosen)]
            if draw(st.integers(0, 3)) == 0:  # a partition that is shared, and pays its counters once
                devices[0]["allowMultipleAllocations"] = True
            pool = f"{name}-mig"
            objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                            "metadata": {"name": f"{pool}-devices"},
                            "spec": {"driver": MIG_DRIVER, "nodeName": name, "devices": devices,
                                     "pool": {"name": pool, "generation": 1, "resourceSliceCount": 2}}})
            memory, slices = draw(st.sampled_from([("40Gi", 4), ("40Gi", 4), ("30Gi", 3), ("20Gi", 4)]))
            objects.append(_counter_slice(f"{pool}-counters", pool, "gpu-0", memory, slices, {"nodeName": name}))
            partitions[name] = [d["name"] for d in devices]
        if draw(st.booleans()):
            policy = draw(st.sampled_from(BANDWIDTH_POLICIES))
            capacity: dict[str, Any] = {"value": draw(st.sampled_from(["4G", "10G"]))}
            if policy is not None:
                capacity["requestPolicy"] = policy
            devices = [{"name": f"vnic-{i}", "allowMultipleAllocations": True, "attributes": {"port": {"int": i % 2}},
                        "capacity": {"bandwidth": capacity}} for i in range(draw(st.integers(1, 2)))]
            objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                            "metadata": {"name": f"{name}-vnic"},
                            "spec": {"driver": VNIC_DRIVER, "nodeName": name, "devices": devices,
                                     "pool": {"name": f"{name}-vnic", "generation": 1, "resourceSliceCount": 1}}})
            nics[name] = [d["name"] for d in devices]
    if draw(st.integers(0, 2)) == 0:
        devices = []
        for i, (p, memory, slices) in enumerate(draw(st.lists(st.sampled_from(PARTITIONS), min_size=1, max_size=3,
                                                               unique=True))):
            device = _partition(p, memory, slices, "shared-0", i)
            where = draw(st.integers(0, 3))
            if where == 0:
                device["allNodes"] = True
            elif where == 1:
                device["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": ZONE_KEY, "operator": "In", "values": [draw(st.sampled_from(ZONES))]}]}]}
            else:
                device["nodeName"] = draw(st.sampled_from([n["metadata"]["name"] for n in nodes]))
            devices.append(device)
        objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                        "metadata": {"name": "mig-shared-devices"},
                        "spec": {"driver": MIG_DRIVER, "perDeviceNodeSelection": True, "devices": devices,
                                 "pool": {"name": "mig-shared", "generation": 1, "resourceSliceCount": 2}}})
        memory, slices = draw(st.sampled_from([("40Gi", 4), ("20Gi", 2)]))
        objects.append(_counter_slice("mig-shared-counters", "mig-shared", "shared-0", memory, slices,
                                      {"perDeviceNodeSelection": True}))
    return objects, partitions, nics


@st.composite
def device_classes(draw: st.DrawFn) -> list[dict[str, Any]]:
    """DEVICE_CLASSES, now and then providing the pods' extended resource `example.com/gpu`
    (DRAExtendedResource): `gpu`, or `big-gpu`, or both (the newer class wins, on equal
    creation times the smaller name, and the loser has no implicit name either)."""
    classes = copy.deepcopy(list(DEVICE_CLASSES))
    providers = draw(st.sampled_from([(), (), ("gpu",), ("big-gpu",), ("gpu", "big-gpu")]))
    for device_class in classes:
        if device_class["metadata"]["name"] in providers:
            device_class["spec"]["extendedResourceName"] = GPU
            if len(providers) > 1 and draw(st.booleans()):
                device_class["metadata"]["creationTimestamp"] = draw(st.sampled_from(
                    ["2025-06-01T00:00:00Z", "2025-07-01T00:00:00Z"]))
    return classes


IMPLICIT = "deviceclass.resource.kubernetes.io/"
"""A class's implicit extended resource name is this plus its name."""


@st.composite
def extended_requests(draw: st.DrawFn, pending: dict[str, Any]) -> dict[str, Any] | None:
    """Now and then a pending pod asks for a class's implicit extended resource (`gpu` or
    `nic`, one or two) in a container (an init container's count may be covered by a later
    container's), and now and then a claim an earlier cycle created for its extended
    resources is left over (its binding failed): upstream rejects every node and deletes it."""
    if draw(st.integers(0, 3)) == 0:
        containers = pending["spec"]["containers"] + pending["spec"].get("initContainers", [])
        container = draw(st.sampled_from(containers))
        requests = container.setdefault("resources", {}).setdefault("requests", {})
        requests[IMPLICIT + draw(st.sampled_from(["gpu", "nic"]))] = draw(st.sampled_from(["1", "2"]))
    if draw(st.integers(0, 11)) == 0:
        meta = pending["metadata"]
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {
            "name": f"{meta['name']}-extended-resources-abcde", "namespace": meta["namespace"],
            "generateName": f"{meta['name']}-extended-resources-",
            "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": _uid(pending),
                                 "controller": True}]},
            "spec": {"devices": {"requests": [{"name": "container-0-request-0", "exactly": {
                "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}}]}}}
    return None


def _device_selectors(draw: st.DrawFn, device_class: str) -> list[dict[str, Any]]:
    if device_class in ("mig", "vnic"):
        if device_class == "mig" and draw(st.integers(0, 2)) == 0:
            profile = draw(st.sampled_from(["full", "half", "quarter"]))
            return [{"cel": {"expression": f'device.attributes["{MIG_DRIVER}"].profile == "{profile}"'}}]
        return []
    family = "nic" if device_class == "nic" else "gpu"
    chosen = draw(st.lists(st.sampled_from(REQUEST_SELECTORS[family]), max_size=1))
    return [{"cel": {"expression": expression}} for expression in chosen]


def _exact(draw: st.DrawFn, *, admin: bool, partitioned: bool = False) -> dict[str, Any]:
    """An ExactDeviceRequest (or a sub-request's fields, without adminAccess): a class (now and
    then one that does not exist), selectors, ExactCount with a count or All, now and then
    capacity requests. allocationMode and count are left out now and then: the API server
    defaults them to ExactCount and 1."""
    classes = ["gpu", "big-gpu", "nic", "mig", "mig", "mig", "vnic", "vnic", "vnic"] if partitioned else [
        "gpu", "gpu", "big-gpu", "nic"]
    device_class = "no-such-class" if draw(st.integers(0, 11)) == 0 else draw(st.sampled_from(classes))
    out: dict[str, Any] = {"deviceClassName": device_class}
    selectors = _device_selectors(draw, device_class)
    if selectors:
        out["selectors"] = selectors
    wanted = CAPACITY_REQUESTS.get(device_class)
    if wanted is not None and partitioned and draw(st.integers(0, 3 if device_class == "vnic" else 5)) and (
            device_class == "vnic" or draw(st.integers(0, 3)) == 0):
        out["capacity"] = {"requests": {wanted[0]: draw(st.sampled_from(wanted[1]))}}
    mode = draw(st.integers(0, 5))
    if mode in (1, 2, 3):
        out["allocationMode"] = "ExactCount"
        out["count"] = draw(st.sampled_from([1, 1, 2]))
    elif mode == 4:
        out["allocationMode"] = "All"
    if admin and draw(st.integers(0, 3)) == 0:
        out["adminAccess"] = True
    return out


@st.composite
def claim_spec(draw: st.DrawFn, namespace: str, *, partitioned: bool = False) -> dict[str, Any]:
    """A ResourceClaimSpec: one or two requests, each exactly one device request or a
    firstAvailable list of sub-requests, and now and then a matchAttribute constraint on the
    GPUs' NUMA node (with `partitioned`, a matchAttribute or distinctAttribute on the GPUs' NUMA
    node, the partitions' card or the shared NICs' port), for all requests or one of them."""
    requests: list[dict[str, Any]] = []
    for i in range(draw(st.sampled_from([1, 1, 2]) if partitioned else st.integers(1, 2))):
        name = f"req-{i}"
        if draw(st.integers(0, 3)) == 0:
            requests.append({"name": name, "firstAvailable": [
                {"name": f"sub-{j}", **_exact(draw, admin=False, partitioned=partitioned)}
                for j in range(draw(st.integers(1, 2)))]})
        else:
            requests.append({"name": name, "exactly": _exact(draw, admin=namespace == ADMIN_NAMESPACE,
                                                             partitioned=partitioned)})
    devices: dict[str, Any] = {"requests": requests}
    if draw(st.integers(0, 3)) == 0:
        constraint: dict[str, Any] = {"matchAttribute": f"{GPU_DRIVER}/numa"}
        if partitioned:
            constraint = {draw(st.sampled_from(["distinctAttribute", "matchAttribute"])): draw(st.sampled_from(
                [f"{MIG_DRIVER}/card", f"{VNIC_DRIVER}/port", f"{GPU_DRIVER}/numa"]))}
        if draw(st.booleans()):
            constraint["requests"] = [draw(st.sampled_from([r["name"] for r in requests]))]
        devices["constraints"] = [constraint]
    return {"devices": devices}


class DevicePool:
    """The DRA family's objects and what pods may use of them: claims by name and templates per
    namespace, the GPUs free per node (for claims allocated to running pods)."""

    def __init__(self, objects: list[dict[str, Any]], gpus: dict[str, list[str]]) -> None:
        self.objects = objects
        self.free = gpus
        self.partitions: dict[str, list[str]] = {}
        self.nics: dict[str, list[str]] = {}
        self.claims: dict[str, list[str]] = {}
        self.templates: dict[str, list[str]] = {}


@st.composite
def device_pool(draw: st.DrawFn, nodes: list[dict[str, Any]], *, partitioned: bool | None = None) -> DevicePool:
    """The DRA family: the inventory (half the time with partitioned_inventory's devices, always
    with `partitioned`), and per namespace 0-2 unallocated ResourceClaims and 0-1
    ResourceClaimTemplates."""
    objects, gpus = draw(device_inventory(nodes))
    pool = DevicePool(objects, gpus)
    if partitioned is None:
        partitioned = draw(st.booleans())
    if partitioned:
        more, pool.partitions, pool.nics = draw(partitioned_inventory(nodes))
        objects += more
    for n, namespace in enumerate(NAMESPACES):
        for i in range(draw(st.integers(0, 2))):
            objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                            "metadata": {"name": f"rc-{n}{i}", "namespace": namespace},
                            "spec": draw(claim_spec(namespace, partitioned=partitioned))})
            pool.claims.setdefault(namespace, []).append(f"rc-{n}{i}")
        if draw(st.booleans()):
            objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                            "metadata": {"name": f"tpl-{n}", "namespace": namespace},
                            "spec": {"spec": draw(claim_spec(namespace, partitioned=partitioned))}})
            pool.templates.setdefault(namespace, []).append(f"tpl-{n}")
    return pool


def _uid(pod: dict[str, Any]) -> str:
    meta = pod["metadata"]
    return str(meta.setdefault("uid", f"uid-{meta['namespace']}-{meta['name']}"))


def _use_claim(pod: dict[str, Any], pod_claim: dict[str, Any]) -> None:
    """The pod lists the claim, and its first container uses it."""
    pod["spec"].setdefault("resourceClaims", []).append(pod_claim)
    resources = pod["spec"]["containers"][0].setdefault("resources", {})
    resources.setdefault("claims", []).append({"name": pod_claim["name"]})


@st.composite
def allocated_claim(draw: st.DrawFn, pool: DevicePool, running: dict[str, Any]) -> None:
    """Now and then a running pod holds a GPU of its node through a claim allocated to it and
    reserved for it (shared: a pending pod may ask for the same claim by name); or the claim
    stays allocated with no pod reserving it (its pod is gone, PostFilter may deallocate it)."""
    node_name = running["spec"]["nodeName"]
    if draw(allocated_partition(pool, running)):
        return
    free = pool.free.get(node_name)
    if not free or draw(st.integers(0, 2)):
        return
    device = draw(st.sampled_from(free))
    free.remove(device)
    namespace, pod_name = running["metadata"]["namespace"], running["metadata"]["name"]
    name = f"{pod_name}-gpu"
    status: dict[str, Any] = {"allocation": {
        "devices": {"results": [{"request": "gpu", "driver": GPU_DRIVER, "pool": node_name, "device": device}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}}}
    if draw(st.integers(0, 2)) == 0:
        status.update(draw(binding_state(node_name, device)))
    if draw(st.integers(0, 3)):
        status["reservedFor"] = [{"resource": "pods", "name": pod_name, "uid": _uid(running)}]
        _use_claim(running, {"name": "gpu", "resourceClaimName": name})
    pool.objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                         "metadata": {"name": name, "namespace": namespace,
                                      "finalizers": ["resource.kubernetes.io/delete-protection"]},
                         "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                             "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}}]}},
                         "status": status})
    pool.claims.setdefault(namespace, []).append(name)


BINDING = "gpu.example.com/attached"
BINDING_FAILED = "gpu.example.com/attach-failed"


@st.composite
def binding_state(draw: st.DrawFn, node_name: str, device: str) -> dict[str, Any]:
    """DRADeviceBindingConditions: the allocated device waits for `attached` (and fails on
    `attach-failed`), allocated long ago (past the 600s binding timeout) or far in the future
    (within it, whenever the test runs); its status.devices entry says nothing yet, the
    condition is met, or the failure is."""
    allocation = {"devices": {"results": [{
        "request": "gpu", "driver": GPU_DRIVER, "pool": node_name, "device": device,
        "bindingConditions": [BINDING], "bindingFailureConditions": [BINDING_FAILED]}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node_name]}]}]},
        "allocationTimestamp": draw(st.sampled_from(["2025-01-01T00:00:00Z", "2099-01-01T00:00:00Z"]))}
    out: dict[str, Any] = {"allocation": allocation}
    condition = draw(st.sampled_from([None, BINDING, BINDING_FAILED]))
    if condition is not None:
        out["devices"] = [{"driver": GPU_DRIVER, "pool": node_name, "device": device, "conditions": [
            {"type": condition, "status": "True", "reason": "Attach", "message": "the fabric said so",
             "lastTransitionTime": "2025-01-01T00:00:00Z"}]}]
    return out


@st.composite
def allocated_partition(draw: st.DrawFn, pool: DevicePool, running: dict[str, Any]) -> bool:
    """Now and then a running pod holds a partition of its node's GPU (its counters are used,
    and may then leave less than the counter set holds for the others) or a share of a shared
    NIC (a shareID and the bandwidth it consumes). True when it holds one."""
    node_name = running["spec"]["nodeName"]
    partitions, nics = pool.partitions.get(node_name), pool.nics.get(node_name)
    choices = (["mig"] if partitions else []) + (["vnic"] if nics else [])
    if not choices or draw(st.integers(0, 1)):
        return False
    kind = draw(st.sampled_from(choices))
    namespace, pod_name = running["metadata"]["namespace"], running["metadata"]["name"]
    name = f"{pod_name}-{kind}"
    if kind == "mig":
        assert partitions is not None
        device = draw(st.sampled_from(partitions))
        partitions.remove(device)
        result: dict[str, Any] = {"request": "dev", "driver": MIG_DRIVER, "pool": f"{node_name}-mig",
                                  "device": device}
    else:
        assert nics is not None
        result = {"request": "dev", "driver": VNIC_DRIVER, "pool": f"{node_name}-vnic",
                  "device": draw(st.sampled_from(nics)), "shareID": f"00000000-0000-0000-0000-{len(pool.objects):012d}",
                  "consumedCapacity": {"bandwidth": draw(st.sampled_from(["1G", "2G", "3G", "4G"]))}}
    status: dict[str, Any] = {"allocation": {"devices": {"results": [result]}, "nodeSelector": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}}}
    status["reservedFor"] = [{"resource": "pods", "name": pod_name, "uid": _uid(running)}]
    _use_claim(running, {"name": "dev", "resourceClaimName": name})
    pool.objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                         "metadata": {"name": name, "namespace": namespace,
                                      "finalizers": ["resource.kubernetes.io/delete-protection"]},
                         "spec": {"devices": {"requests": [{"name": "dev", "exactly": {
                             "deviceClassName": kind, "allocationMode": "ExactCount", "count": 1}}]}},
                         "status": status})
    return True


@st.composite
def pod_claims(draw: st.DrawFn, pool: DevicePool, pending: dict[str, Any], *, always: bool = False) -> None:
    """Now and then a pending pod asks for devices: one or two claims, each by name (one of its
    namespace's, or one that does not exist) or through a template. For a template, mostly as the
    resourceclaim controller leaves it (the claim made from the template, owned by the pod, in
    the pod's status.resourceClaimStatuses), and now and then before the controller got to it
    (no status: upstream keeps the pod out of the queue)."""
    if not always and draw(st.integers(0, 1)):
        return
    namespace, pod_name = pending["metadata"]["namespace"], pending["metadata"]["name"]
    statuses = []
    for i in range(draw(st.sampled_from([1, 1, 2]))):
        pod_claim_name = f"dev-{i}"
        templates: list[str] = pool.templates.get(namespace, [])
        named: list[str] = pool.claims.get(namespace, [])
        how = draw(st.integers(0, 7))  # 0: a claim that does not exist, 1-3: a template, else by name
        if len(templates) > 0 and (how in (1, 2, 3) or (how > 3 and not named)):
            template_name: str = draw(st.sampled_from(templates))
            _use_claim(pending, {"name": pod_claim_name, "resourceClaimTemplateName": template_name})
            if draw(st.integers(0, 3)) == 0:
                continue
            template = next(o for o in pool.objects if o["kind"] == "ResourceClaimTemplate"
                            and o["metadata"] == {"name": template_name, "namespace": namespace})
            name = f"{pod_name}-{pod_claim_name}-x{i}z7q"
            pool.objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {
                "name": name, "namespace": namespace,
                "annotations": {"resource.kubernetes.io/pod-claim-name": pod_claim_name},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": _uid(pending),
                                     "controller": True, "blockOwnerDeletion": True}]},
                "spec": copy.deepcopy(template["spec"]["spec"])})
            statuses.append({"name": pod_claim_name, "resourceClaimName": name})
        else:
            if how and not named:
                continue  # nothing to ask for by name: "missing-claim" stays the rare case
            claim = draw(st.sampled_from(named)) if how else "missing-claim"
            if any(c.get("resourceClaimName") == claim for c in pending["spec"].get("resourceClaims", [])):
                continue  # the API server accepts it twice, but one is enough
            _use_claim(pending, {"name": pod_claim_name, "resourceClaimName": claim})
    _uid(pending)
    if statuses:
        pending.setdefault("status", {})["resourceClaimStatuses"] = statuses


@st.composite
def clusters(draw: st.DrawFn, *, max_nodes: int = 5, max_running: int = 6, max_pending: int = 4,
             dra: bool = True, storage_capacity_objects: bool = True, resize: bool = True,
             partitioned: bool = False) -> list[dict[str, Any]]:
    """A snapshot: namespaces, nodes, running pods bound to them, pending pods in creation order.
    `dra`, `storage_capacity_objects` and `resize` False leave those families out (for a caller
    that cannot create them, as tests/cluster's check of the oracle against kube-scheduler);
    `partitioned` always draws the DRA family with partitionable and shared devices."""
    nodes = [draw(node(f"node-{i}")) for i in range(draw(st.integers(1, max_nodes)))]
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default", "labels": {"team": "a"}}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {
            "resource.kubernetes.io/admin-access": "true"}}},
        *PRIORITY_CLASSES,
        *nodes,
    ]
    for i in range(draw(st.integers(0, 2))):
        objects.append(draw(disruption_budget(f"pdb-{i}")))
    if draw(st.integers(0, 2)) == 0:  # passed to both sides, as kube-scheduler's --config
        objects.append(draw(scheduler_configuration()))
    claims: dict[str, list[str]] | None = None
    if draw(st.integers(0, 2)) == 0:
        volume_objects, claims = draw(storage(nodes, capacity=storage_capacity_objects))
        objects += volume_objects
    devices: DevicePool | None = None
    if partitioned or (dra and draw(st.integers(0, 2)) == 0):
        devices = draw(device_pool(nodes, partitioned=True if partitioned else None))
    for i in range(draw(st.integers(0, max_running))):
        running = draw(pod(f"run-{i}", pending=False, claims=claims))
        running["spec"]["nodeName"] = draw(st.sampled_from([n["metadata"]["name"] for n in nodes]))
        if devices is not None:
            draw(allocated_claim(devices, running))
        # Distinct start times: preemption spares the longest-running of equal priority, and
        # equal (missing) times would leave the choice to the order of pods on the node.
        running["status"] = {"phase": "Running", "startTime": f"2025-12-31T00:00:{i:02d}Z"}
        if resize and draw(st.integers(0, 3)) == 0:
            running["status"].update(draw(resize_status(running)))
        objects.append(running)
    for i in range(draw(st.integers(1, max_pending))):
        pending = draw(pod(f"pod-{i}", pending=True, claims=claims))
        pending["metadata"]["creationTimestamp"] = f"2026-01-01T00:00:{i:02d}Z"
        if devices is not None:
            draw(pod_claims(devices, pending))
            leftover = draw(extended_requests(pending))
            if leftover is not None:
                devices.objects.append(leftover)
        if draw(st.integers(0, 4)) == 0:  # an earlier attempt preempted for it: its room is kept
            pending.setdefault("status", {})["nominatedNodeName"] = draw(st.sampled_from(
                [n["metadata"]["name"] for n in nodes]))
        objects.append(pending)
    if devices is not None:  # with the claims the pods added
        objects += devices.objects
    return objects


@st.composite
def partitioned_clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Clusters about partitionable and shared DRA devices alone (benchmarks.differential_scan
    --partitioned, tests/differential/test_partitionable.py): 1-3 untainted nodes, the DRA
    family with partitioned_inventory's devices, 0-4 running pods (some holding partitions,
    shares or GPUs), and 1-4 pending pods that each ask for devices, with no other constraint
    that could turn them away."""
    nodes = []
    for i in range(draw(st.integers(1, 3))):
        node_obj = draw(node(f"node-{i}"))
        node_obj["spec"] = {}
        node_obj["status"]["allocatable"]["pods"] = node_obj["status"]["capacity"]["pods"] = "110"
        nodes.append(node_obj)
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default", "labels": {"team": "a"}}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {
            "resource.kubernetes.io/admin-access": "true"}}},
        *nodes,
    ]
    devices = draw(device_pool(nodes, partitioned=True))

    def simple(name: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": draw(st.sampled_from(NAMESPACES))},
                "spec": {"containers": [{"name": "c0", "image": "nginx:1.27",
                                         "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}

    for i in range(draw(st.integers(0, 4))):
        running = simple(f"run-{i}")
        running["spec"]["nodeName"] = draw(st.sampled_from([n["metadata"]["name"] for n in nodes]))
        draw(allocated_claim(devices, running))
        running["status"] = {"phase": "Running", "startTime": f"2025-12-31T00:00:{i:02d}Z"}
        objects.append(running)
    for i in range(draw(st.integers(1, 4))):
        pending = simple(f"pod-{i}")
        pending["metadata"]["creationTimestamp"] = f"2026-01-01T00:00:{i:02d}Z"
        draw(pod_claims(devices, pending, always=True))
        objects.append(pending)
    return objects + devices.objects

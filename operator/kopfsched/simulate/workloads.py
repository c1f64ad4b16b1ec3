"""Workloads in simulate input become the pods their controllers would make.

Deployment → ReplicaSet → Pods, StatefulSet → `<name>-<ordinal>` pods (and their claims),
Job → `parallelism` pods, DaemonSet → one pod per node it should run on, pinned to that
node by node affinity as upstream's DaemonSet controller does
(ReplaceDaemonSetPodNodeNameNodeAffinity, AddOrUpdateDaemonPodTolerations).

A workload whose pods are already in the input gets only its missing ones, found by
owner references (the controller reference's uid, or kind and name when the input has no
uids), so expanding a live snapshot adds nothing that already runs. Names are
deterministic (derived from the owner's name and the template), so two runs of the same
input - `--compare` - make the same pods.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable
from typing import Any

from kopfsched.framework.types import Obj
from kopfsched.plugins.helper.tolerations import NO_EXECUTE, NO_SCHEDULE, tolerates_taint
from kopfsched.plugins.nodeaffinity import RequiredNodeAffinity
from kopfsched.simulate.loader import ClusterInput, Loaded

_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""Upstream's rand.SafeEncodeString alphabet (no vowels, no look-alikes)."""

_DAEMON_TOLERATIONS = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": NO_EXECUTE},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": NO_EXECUTE},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": NO_SCHEDULE},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": NO_SCHEDULE},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": NO_SCHEDULE},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": NO_SCHEDULE},
)
_HOST_NETWORK_TOLERATION = {"key": "node.kubernetes.io/network-unavailable", "operator": "Exists",
                            "effect": NO_SCHEDULE}


def _safe(seed: str, length: int) -> str:
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:length])


def _template_hash(template: Any) -> str:
    return _safe(json.dumps(template, sort_keys=True), 10)


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _owner_ref(owner: Obj) -> Obj:
    meta = _meta(owner)
    ref = {"apiVersion": owner.get("apiVersion") or "apps/v1", "kind": owner["kind"], "name": meta["name"],
           "controller": True, "blockOwnerDeletion": True}
    if meta.get("uid"):
        ref["uid"] = meta["uid"]
    return ref


def _owned_by(obj: Obj, owner: Obj) -> bool:
    """Whether `owner` is obj's controller (same namespace), by uid when both have one."""
    meta, owner_meta = _meta(obj), _meta(owner)
    if (meta.get("namespace") or "default") != (owner_meta.get("namespace") or "default"):
        return False
    for ref in meta.get("ownerReferences") or ():
        if not ref.get("controller", False) or ref.get("kind") != owner["kind"]:
            continue
        if ref.get("uid") and owner_meta.get("uid"):
            if ref["uid"] == owner_meta["uid"]:
                return True
        elif ref.get("name") == owner_meta.get("name"):
            return True
    return False


def _pod_from_template(owner: Obj, name: str, *, extra_labels: dict[str, str] | None = None) -> Obj:
    template = copy.deepcopy((owner.get("spec") or {}).get("template") or {})
    tmeta = template.get("metadata") or {}
    meta = _meta(owner)
    pod_meta: Obj = {"name": name, "namespace": meta.get("namespace") or "default",
                     "labels": {**(tmeta.get("labels") or {}), **(extra_labels or {})},
                     "ownerReferences": [_owner_ref(owner)]}
    if tmeta.get("annotations"):
        pod_meta["annotations"] = dict(tmeta["annotations"])
    if meta.get("creationTimestamp"):
        pod_meta["creationTimestamp"] = meta["creationTimestamp"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": template.get("spec") or {},
            "status": {"phase": "Pending"}}


def _replicas(obj: Obj, default: int = 1) -> int:
    value = (obj.get("spec") or {}).get("replicas")
    return value if isinstance(value, int) and value >= 0 else default


class _Expansion:
    def __init__(self, inputs: ClusterInput) -> None:
        self.inputs = inputs
        self.pods = [p.obj for p in inputs.pods]
        self.names = {(_meta(p).get("namespace") or "default", _meta(p)["name"]) for p in self.pods}
        self.made = 0

    def owned_pods(self, owner: Obj) -> list[Obj]:
        return [p for p in self.pods if _owned_by(p, owner)]

    def add_pod(self, pod: Obj, source: str) -> None:
        self.pods.append(pod)
        self.names.add((pod["metadata"]["namespace"], pod["metadata"]["name"]))
        self.inputs.pods.append(Loaded(pod, source))
        self.made += 1

    def unique_name(self, namespace: str, prefix: str, seed: str) -> str:
        for attempt in range(100):
            name = f"{prefix}-{_safe(f'{seed}/{attempt}', 5)}"
            if (namespace, name) not in self.names:
                return name
        raise RuntimeError(f"no free pod name for {namespace}/{prefix}")  # 100 collisions: impossible in practice

    # -- controllers ------------------------------------------------------------------------

    def replica_set(self, rs: Obj, source: str) -> None:
        missing = _replicas(rs) - len(self.owned_pods(rs))
        meta = _meta(rs)
        namespace = meta.get("namespace") or "default"
        for i in range(missing):
            name = self.unique_name(namespace, meta["name"], f"{meta['name']}/{i}")
            self.add_pod(_pod_from_template(rs, name), source)

    def deployment(self, deploy: Obj, source: str) -> None:
        if any(_owned_by(o.obj, deploy) for o in self.inputs.objects if o.obj.get("kind") == "ReplicaSet"):
            return  # its ReplicaSets are in the input and expand themselves
        meta = _meta(deploy)
        template = copy.deepcopy((deploy.get("spec") or {}).get("template") or {})
        pod_hash = _template_hash(template)
        tmeta = template.setdefault("metadata", {})
        tmeta["labels"] = {**(tmeta.get("labels") or {}), "pod-template-hash": pod_hash}
        selector = copy.deepcopy((deploy.get("spec") or {}).get("selector") or {})
        selector.setdefault("matchLabels", {})["pod-template-hash"] = pod_hash
        rs_meta: Obj = {"name": f"{meta['name']}-{pod_hash}", "namespace": meta.get("namespace") or "default",
                        "labels": dict(tmeta["labels"]), "ownerReferences": [_owner_ref(deploy)]}
        if meta.get("creationTimestamp"):
            rs_meta["creationTimestamp"] = meta["creationTimestamp"]
        rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": rs_meta,
              "spec": {"replicas": _replicas(deploy), "selector": selector, "template": template}}
        self.inputs.objects.append(Loaded(rs, source))
        self.replica_set(rs, source)

    def stateful_set(self, sts: Obj, source: str) -> None:
        meta = _meta(sts)
        namespace = meta.get("namespace") or "default"
        spec = sts.get("spec") or {}
        start = ((spec.get("ordinals") or {}).get("start")) or 0
        claims = {(o.obj["metadata"].get("namespace"), o.obj["metadata"]["name"]) for o in self.inputs.objects
                  if o.obj.get("kind") == "PersistentVolumeClaim"}
        for ordinal in range(start, start + _replicas(sts)):
            name = f"{meta['name']}-{ordinal}"
            if (namespace, name) in self.names:
                continue
            pod = _pod_from_template(sts, name, extra_labels={"statefulset.kubernetes.io/pod-name": name,
                                                              "apps.kubernetes.io/pod-index": str(ordinal)})
            pod["spec"].setdefault("hostname", name)
            if spec.get("serviceName"):
                pod["spec"].setdefault("subdomain", spec["serviceName"])
            volumes = pod["spec"].setdefault("volumes", [])
            for template in spec.get("volumeClaimTemplates") or ():
                tname = _meta(template).get("name") or "data"
                claim_name = f"{tname}-{name}"
                volumes[:] = [v for v in volumes if v.get("name") != tname]
                volumes.append({"name": tname, "persistentVolumeClaim": {"claimName": claim_name}})
                if (namespace, claim_name) not in claims:
                    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                             "metadata": {"name": claim_name, "namespace": namespace,
                                          "labels": dict(pod["metadata"].get("labels") or {})},
                             "spec": copy.deepcopy(template.get("spec") or {}), "status": {"phase": "Pending"}}
                    self.inputs.objects.append(Loaded(claim, source))
                    claims.add((namespace, claim_name))
            self.add_pod(pod, source)

    def job(self, job: Obj, source: str) -> None:
        spec = job.get("spec") or {}
        status = job.get("status") or {}
        finished = any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
                       for c in status.get("conditions") or ())
        if spec.get("suspend") or finished:
            return
        parallelism = spec.get("parallelism")
        parallelism = parallelism if isinstance(parallelism, int) and parallelism >= 0 else 1
        completions = spec.get("completions")
        wanted = parallelism
        if isinstance(completions, int):
            wanted = min(parallelism, max(completions - (status.get("succeeded") or 0), 0))
        meta = _meta(job)
        namespace = meta.get("namespace") or "default"
        labels = {"batch.kubernetes.io/job-name": meta["name"], "job-name": meta["name"]}
        if meta.get("uid"):
            labels["batch.kubernetes.io/controller-uid"] = labels["controller-uid"] = meta["uid"]
        for i in range(wanted - len(self.owned_pods(job))):
            name = self.unique_name(namespace, meta["name"], f"{meta['name']}/{i}")
            self.add_pod(_pod_from_template(job, name, extra_labels=labels), source)

    def daemon_set(self, ds: Obj, nodes: Iterable[Obj], source: str) -> None:
        meta = _meta(ds)
        namespace = meta.get("namespace") or "default"
        owned = self.owned_pods(ds)
        covered = {_target_node(p) for p in owned}
        for node in nodes:
            node_name = _meta(node)["name"]
            if node_name in covered or not should_run_daemon_pod(ds, node):
                continue
            pod = daemon_pod(ds, node_name, self.unique_name(namespace, meta["name"], f"{meta['name']}/{node_name}"))
            self.add_pod(pod, source)


def daemon_pod(ds: Obj, node_name: str, name: str) -> Obj:
    """The pod the DaemonSet controller creates for `node_name`: the template with the
    daemon tolerations and a required node affinity naming that node (any other required
    node affinity terms replaced, as upstream)."""
    pod = _pod_from_template(ds, name)
    spec = pod["spec"]
    tolerations = list(spec.get("tolerations") or ())
    wanted = list(_DAEMON_TOLERATIONS) + ([_HOST_NETWORK_TOLERATION] if spec.get("hostNetwork") else [])
    for toleration in wanted:
        tolerations = [t for t in tolerations if not (t.get("key") == toleration["key"]
                                                       and t.get("effect") == toleration["effect"])]
        tolerations.append(dict(toleration))
    spec["tolerations"] = tolerations
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
    affinity = spec.setdefault("affinity", {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [term]}
    return pod


def should_run_daemon_pod(ds: Obj, node: Obj) -> bool:
    """Upstream's NodeShouldRunDaemonPod for a new pod: the template's nodeName (if any),
    nodeSelector and required node affinity match, and every NoSchedule/NoExecute taint is
    tolerated (with the daemon tolerations added)."""
    template_spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    meta = _meta(node)
    if template_spec.get("nodeName") and template_spec["nodeName"] != meta["name"]:
        return False
    if not RequiredNodeAffinity(template_spec).match(meta.get("labels") or {}, meta["name"]):
        return False
    tolerations = [*(template_spec.get("tolerations") or ()), *_DAEMON_TOLERATIONS]
    if template_spec.get("hostNetwork"):
        tolerations.append(_HOST_NETWORK_TOLERATION)
    for taint in (node.get("spec") or {}).get("taints") or ():
        if taint.get("effect") not in (NO_SCHEDULE, NO_EXECUTE):
            continue
        if not any(tolerates_taint(t, taint) for t in tolerations):
            return False
    return True


def _target_node(pod: Obj) -> str | None:
    """Where a DaemonSet pod runs or is pinned (upstream's GetTargetNodeName)."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return spec["nodeName"]
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    for term in required.get("nodeSelectorTerms") or ():
        for field in term.get("matchFields") or ():
            if field.get("key") == "metadata.name" and field.get("operator") == "In" and len(field.get("values")
                                                                                               or ()) == 1:
                return field["values"][0]
    return None


def expand_workloads(inputs: ClusterInput) -> int:
    """Add the missing pods (and ReplicaSets, claims) of every workload in the input;
    returns how many pods were made. Consumes inputs.workloads, so a second call adds
    nothing more."""
    workloads, inputs.workloads = inputs.workloads, []
    if not workloads and not any(o.obj.get("kind") in ("ReplicaSet", "StatefulSet") for o in inputs.objects):
        return 0  # nothing to expand: spare indexing every pod's name
    expansion = _Expansion(inputs)
    # Deployments first: the ReplicaSets they make expand with the ones given.
    for loaded in workloads:
        if loaded.obj["kind"] == "Deployment":
            expansion.deployment(loaded.obj, loaded.source)
    for loaded in list(inputs.objects):
        kind = loaded.obj.get("kind")
        if kind == "ReplicaSet":
            expansion.replica_set(loaded.obj, loaded.source)
        elif kind == "StatefulSet":
            expansion.stateful_set(loaded.obj, loaded.source)
    nodes = [n.obj for n in inputs.nodes]
    for loaded in workloads:
        if loaded.obj["kind"] == "Job":
            expansion.job(loaded.obj, loaded.source)
        elif loaded.obj["kind"] == "DaemonSet":
            expansion.daemon_set(loaded.obj, nodes, loaded.source)
    return expansion.made

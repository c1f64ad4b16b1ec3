"""Cluster snapshots for `kopfsched simulate`: Nodes, Pods and the other kinds the
scheduler reads, plus SchedulerProfiles and KubeSchedulerConfigurations, from files,
directories or stdin (`kopfsched.documents` reads them).

Bad input never raises: every problem becomes one line
`file: document N: Kind/ns/name: field: message` (`kopfsched.documents.problem_line`), and the
object it concerns is left out while everything else is kept. Objects of kinds the
scheduler never reads (ConfigMaps, Secrets, ... in a `kubectl get all -o yaml` export)
are skipped with one warning line that counts them.
"""

from __future__ import annotations

import copy
import hashlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any

from kopfsched.documents import (
    UNNAMED_KINDS,
    Document,
    Progress,
    describe_type,
    problem_line,
    read_documents,
)
from kopfsched.framework.quantity import QuantityError
from kopfsched.framework.resources import quantity_value
from kopfsched.framework.types import Obj
from kopfsched.gcpolicy import long_lived

OBJECT_KINDS = (
    "Namespace", "PersistentVolume", "PersistentVolumeClaim", "StorageClass", "PodDisruptionBudget",
    "PriorityClass", "CSINode", "VolumeAttachment", "Service", "ReplicaSet", "ReplicationController", "StatefulSet",
    "PodGroup", "CSIDriver", "CSIStorageCapacity", "DeviceClass", "ResourceClaim", "ResourceClaimTemplate",
    "ResourceSlice", "DeviceTaintRule",
)
CONFIG_KINDS = ("SchedulerProfile", "KubeSchedulerConfiguration")
WORKLOAD_KINDS = ("Deployment", "Job", "DaemonSet")
"""Made into pods as their controllers would (simulate.workloads), then left out."""
CLUSTER_SCOPED = ("Node", "Namespace", "PersistentVolume", "StorageClass", "PriorityClass", "CSINode", "CSIDriver",
                  "VolumeAttachment", "SchedulerProfile", "KubeSchedulerConfiguration", "DeviceClass", "ResourceSlice",
                  "DeviceTaintRule")



@dataclass(slots=True)
class Loaded:
    """One object and where it came from."""

    obj: Obj
    source: str
    """The file (or `<stdin>`)."""
    where: str = ""
    """`file: document N`, the prefix of its problem lines; the source when not given."""

    @property
    def label(self) -> str:
        meta = self.obj.get("metadata") or {}
        if self.obj.get("kind") in UNNAMED_KINDS and not meta.get("name"):
            return self.obj["kind"]  # worded as documents.object_label and validate word it
        name = meta.get("name", "?")
        ns = meta.get("namespace")
        return f"{self.obj.get('kind')}/{ns}/{name}" if ns else f"{self.obj.get('kind')}/{name}"

    def problem(self, message: str) -> str:
        """The one-line problem report for this object."""
        return problem_line(self.where or self.source, self.label, message)


@dataclass
class ClusterInput:
    nodes: list[Loaded] = field(default_factory=list)
    pods: list[Loaded] = field(default_factory=list)
    objects: list[Loaded] = field(default_factory=list)
    configs: list[Loaded] = field(default_factory=list)
    workloads: list[Loaded] = field(default_factory=list)
    """Deployments, Jobs and DaemonSets not yet expanded into pods."""
    problems: list[str] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    """Objects of kinds the scheduler never reads, by kind."""
    warnings: list[str] = field(default_factory=list)
    """Lines for stderr that do not make the input invalid."""

    def copy(self) -> ClusterInput:
        """What copy.deepcopy gives (objects shared within the input, e.g. by YAML aliases,
        stay shared in the copy), at a fraction of its cost on a large input: the objects are plain
        JSON-like data, copied without deepcopy's per-object dispatch."""
        memo: dict[int, Any] = {}
        copied: dict[str, Any] = {}
        for spec in fields(self):
            value = getattr(self, spec.name)
            if isinstance(value, list) and all(type(item) is Loaded for item in value):
                copied[spec.name] = [Loaded(_copy_json(item.obj, memo), item.source, item.where) for item in value]
            else:
                copied[spec.name] = copy.deepcopy(value, memo)
        return ClusterInput(**copied)


_SCALARS = (str, int, float, bool, type(None))


def _copy_json(value: Any, memo: dict[int, Any]) -> Any:
    """copy.deepcopy(value, memo) for dicts, lists and immutable scalars; deepcopy itself for the rest."""
    kind = type(value)
    if kind is dict or kind is list:
        copied = memo.get(id(value))
        if copied is not None:
            return copied
        if kind is dict:
            copied = memo[id(value)] = {}
            for key, item in value.items():
                copied[key] = item if type(item) in _SCALARS else _copy_json(item, memo)
        else:
            copied = memo[id(value)] = []
            copied.extend(item if type(item) in _SCALARS else _copy_json(item, memo) for item in value)
        return copied
    if kind in _SCALARS:
        return value
    return copy.deepcopy(value, memo)


def skipped_warning(skipped: Counter[str]) -> str | None:
    """The one warning line for everything skipped, e.g.
    `warning: skipped 12 objects of kinds the scheduler does not read: ConfigMap (9), Secret (3)`."""
    if not skipped:
        return None
    total = sum(skipped.values())
    kinds = ", ".join(f"{kind} ({count})" for kind, count in sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0])))
    noun = "object" if total == 1 else "objects"
    return f"warning: skipped {total} {noun} of kinds the scheduler does not read: {kinds}"


def load_files(paths: Iterable[str], into: ClusterInput | None = None, *,
               progress: Progress | None = None) -> ClusterInput:
    """The objects of `paths` (files, directories, `-` for stdin) sorted by what simulate does with them."""
    result = into or ClusterInput()
    with long_lived():
        for document in read_documents(paths, result.problems, progress=progress):
            add_document(result, document)
    _finish(result)
    return result


def load_objects(objects: Iterable[Any], source: str, into: ClusterInput | None = None) -> ClusterInput:
    """Objects already parsed (a live cluster's, a test's), checked as files are."""
    result = into or ClusterInput()
    for index, doc in enumerate(objects, 1):
        where = f"{source}: object {index}"
        if not isinstance(doc, dict):
            result.problems.append(f"{where}: not an object")
            continue
        add_document(result, Document(doc, source, where))
    _finish(result)
    return result


def _finish(result: ClusterInput) -> None:
    _check_duplicates(result)
    result.warnings = [w for w in result.warnings if not w.startswith("warning: skipped ")]
    warning = skipped_warning(result.skipped)
    if warning:
        result.warnings.append(warning)


_READ_KINDS = frozenset(("Node", "Pod", *CONFIG_KINDS, *OBJECT_KINDS, *WORKLOAD_KINDS))
_CLUSTER_SCOPED = frozenset(CLUSTER_SCOPED)


def _early_label(kind: Any, name: Any) -> str:
    """`Kind/name` of an object whose kind or name may be missing or no string."""
    return f"{kind if isinstance(kind, str) and kind else '?'}/{name if isinstance(name, str) and name else '?'}"


def add_document(result: ClusterInput, document: Document) -> None:
    """Check one object and file it under nodes, pods, objects or configs (or a problem)."""
    doc, where = document.obj, document.where
    kind = doc.get("kind")
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(kind, str) or not kind:
        result.problems.append(problem_line(where, _early_label(kind, name), "kind: required"))
        return
    if kind not in _READ_KINDS:
        result.skipped[kind] += 1
        return
    if kind == "KubeSchedulerConfiguration":
        result.configs.append(Loaded(doc, document.source, where))
        return
    if not isinstance(meta, dict):
        message = "metadata.name: required" if meta is None else "metadata: must be an object"
        result.problems.append(problem_line(where, _early_label(kind, name), message))
        return
    if not isinstance(name, str) or not name:
        result.problems.append(problem_line(where, _early_label(kind, name), "metadata.name: required"))
        return
    namespace = meta.get("namespace")
    if namespace is not None and (not isinstance(namespace, str) or not namespace):
        result.problems.append(problem_line(where, _early_label(kind, name),
                                            "metadata.namespace: must be a non-empty string"))
        return
    if kind not in _CLUSTER_SCOPED:
        meta.setdefault("namespace", "default")
    loaded = Loaded(doc, document.source, where)
    problem = _check_metadata(meta)
    if kind == "Node":
        problem = problem or _check_node(doc)
        target = result.nodes
    elif kind == "Pod":
        problem = problem or _check_pod(doc)
        target = result.pods
    elif kind in CONFIG_KINDS:
        target = result.configs
    elif kind in WORKLOAD_KINDS:
        target = result.workloads
    else:
        target = result.objects
    if problem:
        result.problems.append(loaded.problem(problem))
        return
    target.append(loaded)


def _check_metadata(meta: dict[str, Any]) -> str | None:
    """Labels and annotations are string maps for the API server; selectors compare strings."""
    for name in ("labels", "annotations"):
        value = meta.get(name)
        if value is None:
            continue
        if not isinstance(value, dict):
            return f"metadata.{name}: must be an object"
        for key, item in value.items():
            if not isinstance(key, str) or not isinstance(item, str):
                wrong = item if isinstance(key, str) else key
                return f"metadata.{name}.{key}: must be a string, got {describe_type(wrong)}"
    return None


def _check_quantities(resources: Any, path: str) -> str | None:
    problem = _quantities_problem(resources)
    return f"{path}{problem}" if problem else None


def _quantities_problem(resources: Any) -> str | None:
    """What is wrong with a ResourceList, to follow its path (`: ...` or `.name: ...`)."""
    if resources is None:
        return None
    if not isinstance(resources, dict):
        return ": must be an object"
    for name, value in resources.items():
        try:
            quantity_value(name, value)
        except QuantityError as exc:
            return f".{name}: {exc}"
    return None


def _check_node(node: Obj) -> str | None:
    status = node.get("status")
    if status is not None and not isinstance(status, dict):
        return "status: must be an object"
    for part in ("capacity", "allocatable"):
        problem = _check_quantities((status or {}).get(part), f"status.{part}")
        if problem:
            return problem
        for name, value in ((status or {}).get(part) or {}).items():
            if quantity_value(name, value) < 0:
                # The API server's ValidateNonnegativeQuantity, word for word.
                return f'status.{part}.{name}: Invalid value: "{value}": must be greater than or equal to 0'
    return None


def _check_pod(pod: Obj) -> str | None:
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return "spec: required"
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        return "spec.containers: required"
    for field_name in ("containers", "initContainers"):
        for i, container in enumerate(spec.get(field_name) or ()):
            if not isinstance(container, dict):
                return f"spec.{field_name}[{i}]: must be an object"
            resources = container.get("resources")
            if not resources:
                continue
            if not isinstance(resources, dict):  # found by tests/fuzz: `resources: true` was a traceback
                return f"spec.{field_name}[{i}].resources: must be an object"
            for part in ("requests", "limits"):
                problem = _quantities_problem(resources.get(part))
                if problem:
                    return f"spec.{field_name}[{i}].resources.{part}{problem}"
    problem = _check_quantities(spec.get("overhead"), "spec.overhead") or _check_shapes(pod)
    if problem:
        return problem
    priority = spec.get("priority")
    if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
        return "spec.priority: must be an integer"
    return None


_POD_SHAPES = (
    (("metadata", "labels"), dict), (("spec", "nodeSelector"), dict), (("spec", "affinity"), dict),
    (("spec", "tolerations"), list), (("spec", "topologySpreadConstraints"), list),
    (("spec", "schedulingGates"), list),
)


def _check_shapes(pod: Obj) -> str | None:
    """The types the API server's validation would have enforced on what the scheduler reads."""
    parts = {"metadata": pod.get("metadata") or {}, "spec": pod.get("spec") or {}}
    for (part, name), kind in _POD_SHAPES:
        value = parts[part].get(name)
        if value is None:
            continue
        if not isinstance(value, kind):
            return f"{part}.{name}: must be {'an object' if kind is dict else 'a list'}"
        if kind is list and not all(isinstance(item, dict) for item in value):
            return f"{part}.{name}: every item must be an object"
    for i, c in enumerate(parts["spec"].get("topologySpreadConstraints") or ()):
        skew = c.get("maxSkew")
        if isinstance(skew, bool) or not isinstance(skew, int) or skew < 1:
            return f"spec.topologySpreadConstraints[{i}].maxSkew: must be an integer greater than zero"
    return None


def _check_duplicates(result: ClusterInput) -> None:
    for group in (result.nodes, result.pods, result.objects, result.workloads):
        seen: dict[str, str] = {}
        kept: list[Loaded] = []
        for item in group:
            label = item.label
            first = seen.get(label)
            if first is not None:
                result.problems.append(item.problem(f"metadata.name: duplicate name (first defined in {first})"))
                continue
            seen[label] = item.where or item.source
            kept.append(item)
        group[:] = kept


def default_requests(result: ClusterInput) -> None:
    """What the API server's defaulting does to a pod's containers (SetDefaults_Pod): a
    resource with a limit and no request gets the limit as its request."""
    for loaded in result.pods:
        spec = loaded.obj["spec"]
        for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
            resources = container.get("resources") or {}
            limits = resources.get("limits")
            if limits:
                requests = resources.setdefault("requests", {})
                for name, value in limits.items():
                    requests.setdefault(name, value)


def apply_priority_classes(result: ClusterInput) -> None:
    """What the Priority admission plugin does: spec.priority from priorityClassName
    (or the globalDefault class); an unknown class is reported and the pod left out."""
    classes = {o.obj["metadata"]["name"]: o.obj for o in result.objects if o.obj.get("kind") == "PriorityClass"}
    default = next((c for c in classes.values() if c.get("globalDefault")), None)
    kept = []
    for loaded in result.pods:
        spec = loaded.obj["spec"]
        name = spec.get("priorityClassName")
        if spec.get("priority") is None:
            chosen = classes.get(name) if name else default
            if name and chosen is None and name not in ("system-cluster-critical", "system-node-critical"):
                result.problems.append(loaded.problem(f"spec.priorityClassName: no PriorityClass named {name!r}"))
                continue
            if chosen is not None:
                spec["priority"] = int(chosen.get("value", 0))
                spec.setdefault("preemptionPolicy", chosen.get("preemptionPolicy", "PreemptLowerPriority"))
            elif name == "system-cluster-critical":
                spec["priority"] = 2000000000
            elif name == "system-node-critical":
                spec["priority"] = 2000001000
        kept.append(loaded)
    result.pods[:] = kept


def generate_resource_claims(result: ClusterInput) -> None:
    """What the resourceclaim controller does for pods that use a ResourceClaimTemplate: a
    claim made from the template, owned by the pod, named in the pod's
    status.resourceClaimStatuses. Claims and statuses already in the input are kept; a
    template that is not in the input leaves the pod waiting for its claim, as in a cluster."""
    templates = {(o.obj["metadata"].get("namespace"), o.obj["metadata"]["name"]): o.obj
                 for o in result.objects if o.obj.get("kind") == "ResourceClaimTemplate"}
    if not templates:
        return  # no claim to make: every pod would be left as it is
    for loaded in result.pods:
        pod = loaded.obj
        meta = pod["metadata"]
        statuses = (pod.get("status") or {}).get("resourceClaimStatuses") or []
        named = {s.get("name") for s in statuses}
        for pod_claim in (pod.get("spec") or {}).get("resourceClaims") or ():
            template_name = pod_claim.get("resourceClaimTemplateName")
            template = templates.get((meta.get("namespace"), template_name)) if template_name else None
            if template is None or pod_claim.get("name") in named:
                continue
            digest = hashlib.sha256(f"{meta.get('namespace')}/{meta['name']}/{pod_claim.get('name')}".encode())
            name = f"{meta['name']}-{pod_claim.get('name')}-{digest.hexdigest()[:5]}"
            template_spec = template.get("spec") or {}
            claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {
                **copy.deepcopy(template_spec.get("metadata") or {}), "name": name, "namespace": meta.get("namespace"),
                "annotations": {"resource.kubernetes.io/pod-claim-name": pod_claim.get("name")},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                                     "uid": meta.get("uid") or f"{meta.get('namespace')}/{meta['name']}",
                                     "controller": True, "blockOwnerDeletion": True}]},
                "spec": copy.deepcopy(template_spec.get("spec") or {})}
            result.objects.append(Loaded(claim, loaded.source, loaded.where))
            statuses.append({"name": pod_claim.get("name"), "resourceClaimName": name})
            named.add(pod_claim.get("name"))
        if statuses:
            pod.setdefault("status", {})["resourceClaimStatuses"] = statuses

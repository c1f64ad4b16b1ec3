"""PersistentVolume / PersistentVolumeClaim rules the binder shares with the PV controller
(upstream's component-helpers/storage/volume), over plain API dicts; the helpers all volume
plugins share are in kopfsched.plugins.helper.volumes.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kopfsched.framework.labels import label_selector
from kopfsched.framework.quantity import QuantityError, parse_quantity
from kopfsched.framework.types import Obj
from kopfsched.plugins.helper.volumes import claim_class, ephemeral_claim_name
from kopfsched.plugins.nodeaffinity import NodeSelector

ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"


def _meta(obj: Obj | None) -> Obj:
    return (obj or {}).get("metadata") or {}


def _spec(obj: Obj | None) -> Obj:
    return (obj or {}).get("spec") or {}


def annotations_of(obj: Obj | None) -> Mapping[str, str]:
    return _meta(obj).get("annotations") or {}


def name_of(obj: Obj | None) -> str:
    return _meta(obj).get("name") or ""


def uid_of(obj: Obj | None) -> str:
    return _meta(obj).get("uid") or ""


def claim_key(pvc: Obj) -> str:
    meta = _meta(pvc)
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def resource_version(obj: Obj | None) -> int | None:
    """The object's resourceVersion as an integer (etcd3's), None when absent or opaque."""
    try:
        return int(_meta(obj).get("resourceVersion"))  # type: ignore[arg-type]  # None: TypeError, below
    except (TypeError, ValueError):
        return None


# --- claims of a pod -----------------------------------------------------------------------


def pod_claims(pod: Obj) -> list[tuple[str, bool]]:
    """(claim name, is a generic ephemeral volume) for every volume that uses a PVC."""
    claims: list[tuple[str, bool]] = []
    spec = _spec(pod)
    for volume in spec.get("volumes") or ():
        pvc = volume.get("persistentVolumeClaim")
        if pvc is not None:
            claims.append((pvc.get("claimName") or "", False))
        elif volume.get("ephemeral") is not None:
            claims.append((ephemeral_claim_name(pod, volume), True))
    return claims


# --- classes, sizes, binding state ---------------------------------------------------------


def volume_class(pv: Obj) -> str:
    """GetPersistentVolumeClass."""
    ann = annotations_of(pv)
    if ANN_STORAGE_CLASS in ann:
        return ann[ANN_STORAGE_CLASS]
    return _spec(pv).get("storageClassName") or ""


def _quantity(raw: Any) -> Fraction:
    if raw is None:
        return Fraction(0)
    try:
        return parse_quantity(raw)
    except QuantityError:
        return Fraction(0)


def requested_storage(pvc: Obj) -> Fraction:
    return _quantity(((_spec(pvc).get("resources") or {}).get("requests") or {}).get("storage"))


def volume_capacity(pv: Obj) -> Fraction:
    return _quantity((_spec(pv).get("capacity") or {}).get("storage"))


def is_pvc_fully_bound(pvc: Obj) -> bool:
    """Bound to a volume, and the PV controller has finished the binding."""
    return bool(_spec(pvc).get("volumeName")) and ANN_BIND_COMPLETED in annotations_of(pvc)


def is_delay_binding_mode(pvc: Obj, storage_class: Obj | None) -> bool:
    """WaitForFirstConsumer. A missing class means immediate binding; so does an unset mode
    (the API server defaults it to Immediate)."""
    if storage_class is None:
        return False
    return storage_class.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER


def is_volume_bound_to_claim(pv: Obj, pvc: Obj) -> bool:
    ref = _spec(pv).get("claimRef")
    if not ref:
        return False
    meta = _meta(pvc)
    if ref.get("name") != meta.get("name") or ref.get("namespace") != meta.get("namespace"):
        return False
    return not ref.get("uid") or ref.get("uid") == meta.get("uid")


# --- node affinity and topology --------------------------------------------------------------


def check_node_affinity(pv: Obj, node_labels: Mapping[str, str]) -> bool:
    """CheckNodeAffinity: the PV's required node affinity, matched on the node's labels only."""
    required = (_spec(pv).get("nodeAffinity") or {}).get("required")
    if required is None:
        return True
    return NodeSelector(required).match(node_labels, "")


def match_topology_selector_terms(terms: Iterable[Mapping[str, Any]] | None, labels: Mapping[str, str]) -> bool:
    """A StorageClass's allowedTopologies: no terms allow every node; a term's expressions are
    ANDed `key In values`; empty or invalid terms select nothing."""
    terms = list(terms or ())
    if not terms:
        return True
    for term in terms:
        expressions = term.get("matchLabelExpressions") or []
        if not expressions or any(not e.get("values") for e in expressions):
            continue
        if all(labels.get(e.get("key", "")) in e["values"] for e in expressions):
            return True
    return False


# --- matching a claim to a volume --------------------------------------------------------------


def _access_modes_ok(pvc: Obj, pv: Obj) -> bool:
    offered = set(_spec(pv).get("accessModes") or ())
    return all(mode in offered for mode in _spec(pvc).get("accessModes") or ())


def _volume_mode(spec: Obj) -> str:
    return spec.get("volumeMode") or "Filesystem"


IndexKeys = list[tuple[str, list[str]]]


@dataclass(frozen=True, slots=True)
class Candidate:
    """A PV that passes every check of FindMatchingVolume that does not depend on the node."""

    pv: Obj
    name: str
    size: Fraction
    pre_bound: bool
    """Bound to the claim already (claimRef): this volume or none, where the iteration reaches it."""
    affinity: NodeSelector | None
    """The PV's required node affinity, parsed; None: every node."""
    index_keys: IndexKeys | None = None
    """(key, values) of each required term when each is one `key In values` expression."""


class ClaimCandidates:
    """One claim's candidate PVs in the class's order, indexed so that a node reads only the
    ones its labels can match: a non-pre-bound PV whose every required term is one `key In
    values` expression (a local volume's) is looked up by the node's label; the others are
    read on every node."""

    __slots__ = ("by_label", "candidates", "everywhere")

    def __init__(self, candidates: list[Candidate]) -> None:
        self.candidates = candidates
        self.everywhere: list[int] = []
        self.by_label: dict[str, dict[str, list[int]]] = {}
        for i, candidate in enumerate(candidates):
            keys = None if candidate.pre_bound else candidate.index_keys
            if keys is None:
                self.everywhere.append(i)
                continue
            for key, values in keys:
                by_value = self.by_label.setdefault(key, {})
                for value in values:
                    by_value.setdefault(value, []).append(i)

    def positions(self, node_labels: Mapping[str, str]) -> Iterable[int]:
        """The candidates a node with these labels may match, in order (a superset)."""
        if not self.by_label:
            return self.everywhere
        found = set(self.everywhere)
        for key, by_value in self.by_label.items():
            value = node_labels.get(key)
            if value is not None:
                found.update(by_value.get(value, ()))
        return sorted(found)

    def depends_on_node(self) -> bool:
        return any(candidate.affinity is not None for candidate in self.candidates)


def _single_in_terms(pv: Obj) -> IndexKeys | None:
    """(key, values) of each required term when each is exactly one `key In values` (a
    necessary condition for the term to match: the full check still runs); else None."""
    terms = ((_spec(pv).get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms") or []
    keys: list[tuple[str, list[str]]] = []
    for term in terms:
        expressions = term.get("matchExpressions") or []
        if term.get("matchFields") or len(expressions) != 1 or expressions[0].get("operator") != "In":
            return None
        values = expressions[0].get("values")
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            return None
        keys.append((str(expressions[0].get("key") or ""), values))
    return keys or None


class VolumeFacts:
    """What matching parses of a PV (its capacity, its required node affinity and the index's
    terms), kept per PV object across cycles: objects are replaced, not changed, on updates,
    and the capacity and affinity values are checked by identity too."""

    __slots__ = ("_by_id",)

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[Obj, Any, Any, Fraction, NodeSelector | None, IndexKeys | None]] = {}

    def of(self, pv: Obj) -> tuple[Fraction, NodeSelector | None, IndexKeys | None]:
        """(capacity, required node affinity or None, its `key In values` terms or None)."""
        spec = _spec(pv)
        raw_size = (spec.get("capacity") or {}).get("storage")
        affinity = spec.get("nodeAffinity")
        found = self._by_id.get(id(pv))
        if found is None or found[0] is not pv or found[1] is not raw_size or found[2] is not affinity:
            if len(self._by_id) > 100_000:
                self._by_id.clear()
            required = (affinity or {}).get("required")
            found = (pv, raw_size, affinity, volume_capacity(pv),
                     None if required is None else NodeSelector(required),
                     None if required is None else _single_in_terms(pv))
            self._by_id[id(pv)] = found
        return found[3], found[4], found[5]


def matching_candidates(pvc: Obj, volumes: Iterable[Obj], facts: VolumeFacts | None = None) -> ClaimCandidates:
    """The node-independent part of FindMatchingVolume (delayed binding): the volumes, in
    order, that pass size, volume mode, attributes class and deletion, and, unless pre-bound to
    this claim, phase, selector, class and access modes. Raises SelectorError for a claim
    selector the API would reject."""
    pvc_spec = _spec(pvc)
    requested = requested_storage(pvc)
    requested_class = claim_class(pvc)
    claim_vac = pvc_spec.get("volumeAttributesClassName") or ""
    claim_mode = _volume_mode(pvc_spec)
    selector = label_selector(pvc_spec["selector"]) if pvc_spec.get("selector") is not None else None
    facts = facts if facts is not None else VolumeFacts()
    candidates: list[Candidate] = []
    for pv in volumes:
        pv_spec = _spec(pv)
        bound_to_claim = is_volume_bound_to_claim(pv, pvc)
        if pv_spec.get("claimRef") and not bound_to_claim:
            continue
        size, affinity, index_keys = facts.of(pv)
        if size < requested or claim_mode != _volume_mode(pv_spec):
            continue
        if claim_vac and claim_vac != (pv_spec.get("volumeAttributesClassName") or ""):
            continue
        if _meta(pv).get("deletionTimestamp"):
            continue
        if not bound_to_claim and (
                (pv.get("status") or {}).get("phase") != "Available"
                or (selector is not None and not selector(_meta(pv).get("labels") or {}))
                or volume_class(pv) != requested_class or not _access_modes_ok(pvc, pv)):
            continue
        candidates.append(Candidate(pv=pv, name=name_of(pv), size=size, pre_bound=bound_to_claim, affinity=affinity,
                                    index_keys=index_keys))
    return ClaimCandidates(candidates)


def pick_matching_volume(candidates: ClaimCandidates, node_labels: Mapping[str, str],
                         excluded: Mapping[str, Obj]) -> Obj | None:
    """The per-node part of FindMatchingVolume: the first non-excluded pre-bound candidate if
    its node affinity fits (else none), or the smallest fitting one (the first of equals)."""
    smallest: Candidate | None = None
    every = candidates.candidates
    for i in candidates.positions(node_labels):
        candidate = every[i]
        if candidate.name in excluded:
            continue
        fits = candidate.affinity is None or candidate.affinity.match(node_labels, "")
        if candidate.pre_bound:
            return candidate.pv if fits else None  # pre-bound: this volume or nothing
        if fits and (smallest is None or smallest.size > candidate.size):
            smallest = candidate
    return smallest.pv if smallest is not None else None


def find_matching_volume(pvc: Obj, volumes: Iterable[Obj], node_labels: Mapping[str, str],
                         excluded: Mapping[str, Obj]) -> Obj | None:
    """FindMatchingVolume on the scheduler's path (a node is given, delayed binding): the volume
    pre-bound to this claim if its node affinity fits, else the smallest available volume that
    satisfies size, volume mode, attributes class, phase, selector, class, node affinity and
    access modes. Raises SelectorError for a claim selector the API would reject."""
    return pick_matching_volume(matching_candidates(pvc, volumes), node_labels, excluded)


def claim_reference(pvc: Obj) -> Obj:
    """The ObjectReference a bound PV's claimRef holds."""
    meta = _meta(pvc)
    ref: Obj = {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                "namespace": meta.get("namespace") or "", "name": meta.get("name") or ""}
    for key in ("uid", "resourceVersion"):
        if meta.get(key):
            ref[key] = meta[key]
    return ref


def bind_volume_to_claim(pv: Obj, pvc: Obj) -> tuple[Obj, bool]:
    """GetBindVolumeToClaim: (a copy of the PV bound to the claim, whether anything changed).
    Sets claimRef, and `pv.kubernetes.io/bound-by-controller` unless the user pre-bound it."""
    pv_spec, pvc_meta = _spec(pv), _meta(pvc)
    set_bound_by_controller = not is_volume_bound_to_claim(pv, pvc)
    new = copy.deepcopy(pv)
    dirty = False
    ref = pv_spec.get("claimRef") or {}
    if (not ref or ref.get("name") != pvc_meta.get("name") or ref.get("namespace") != pvc_meta.get("namespace")
            or (ref.get("uid") or "") != (pvc_meta.get("uid") or "")):
        new.setdefault("spec", {})["claimRef"] = claim_reference(pvc)
        dirty = True
    if set_bound_by_controller and ANN_BOUND_BY_CONTROLLER not in annotations_of(new):
        new.setdefault("metadata", {}).setdefault("annotations", {})[ANN_BOUND_BY_CONTROLLER] = "yes"
        dirty = True
    return new, dirty


def with_selected_node(pvc: Obj, node_name: str) -> Obj:
    """A copy of the claim annotated with the node chosen for its provisioning."""
    new = copy.deepcopy(pvc)
    new.setdefault("metadata", {}).setdefault("annotations", {})[ANN_SELECTED_NODE] = node_name
    return new


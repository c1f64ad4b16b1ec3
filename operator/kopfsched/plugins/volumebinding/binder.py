"""The volume binder (upstream's volumebinding/binder.go): which PVs a pod's claims can use on
a node, the in-memory assumption of the chosen bindings, and the API writes that make them real.

It follows the scheduling cycle:

- PreFilter: `get_pod_volume_claims` sorts the pod's claims into bound ones, unbound ones
  waiting for their first consumer (WaitForFirstConsumer), and unbound immediate ones (which the
  PV controller should have bound already), and lists the PVs of the delayed claims' classes.
- Filter: `find_pod_volumes` checks one node: bound PVs' node affinity; for delayed claims the
  smallest matching available PV (a static binding) or else dynamic provisioning allowed by the
  class's provisioner and allowedTopologies.
- Reserve / Unreserve: `assume_pod_volumes` / `revert_assumed_pod_volumes` in the assume caches.
- PreBind: `bind_pod_volumes` writes PV claimRefs and PVC selected-node annotations, then waits
  until the PV controller (and provisioner) report every claim bound.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from kopfsched.framework.client import ClusterClient
from kopfsched.framework.handle import ObjectLister
from kopfsched.framework.labels import SelectorError, label_selector
from kopfsched.framework.quantity import QuantityError, parse_quantity
from kopfsched.framework.types import Obj
from kopfsched.plugins.helper.volumes import claim_class
from kopfsched.plugins.volumebinding.assume_cache import PV, PVC, PVAssumeCache, PVCAssumeCache
from kopfsched.plugins.volumebinding.volumes import (
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    NOT_SUPPORTED_PROVISIONER,
    ClaimCandidates,
    VolumeFacts,
    annotations_of,
    bind_volume_to_claim,
    check_node_affinity,
    claim_key,
    is_delay_binding_mode,
    is_pvc_fully_bound,
    match_topology_selector_terms,
    matching_candidates,
    name_of,
    pick_matching_volume,
    pod_claims,
    requested_storage,
    resource_version,
    uid_of,
    with_selected_node,
)

ERR_REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
ERR_REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
ERR_REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"

POLL_INTERVAL_SECONDS = 1.0


def _capacity_sufficient(capacity: Obj, size: int) -> bool:
    """maximumVolumeSize when set (more precise), else capacity; missing means none."""
    limit = capacity.get("maximumVolumeSize")
    if limit is None:
        limit = capacity.get("capacity")
    if limit is None:
        return False
    try:
        return math.ceil(parse_quantity(limit)) >= size
    except QuantityError:
        return False


def _node_has_access(capacity: Obj, labels: Mapping[str, str]) -> bool:
    """Only nodeTopology label selectors are supported, as upstream; none means unavailable."""
    topology = capacity.get("nodeTopology")
    if topology is None:
        return False
    try:
        return label_selector(topology)(labels)
    except SelectorError:
        return False


class VolumeBindingError(Exception):
    """Something the pod's claims or the cluster's volumes make impossible to decide or finish;
    the plugin turns it into an Error status."""


@dataclass(slots=True)
class BindingInfo:
    """A static binding: an unbound claim and the PV proposed for it."""

    pvc: Obj
    pv: Obj


@dataclass(slots=True)
class PodVolumes:
    """What binding a pod's volumes on one node takes."""

    static_bindings: list[BindingInfo] = field(default_factory=list)
    dynamic_provisions: list[Obj] = field(default_factory=list)
    """Claims to provision, as they will be annotated with the selected node."""
    node_capacities: list[Obj | None] = field(default_factory=list)
    """Per claim to provision, the CSIStorageCapacity that showed enough room on the node (None
    when capacity is not checked): what StorageCapacityScoring scores."""


@dataclass(slots=True)
class PodVolumeClaims:
    bound_claims: list[Obj] = field(default_factory=list)
    unbound_claims_delay_binding: list[Obj] = field(default_factory=list)
    unbound_claims_immediate: list[Obj] = field(default_factory=list)
    """Includes claims pre-bound to a PV by name that the PV controller has not finished."""
    unbound_volumes_delay_binding: dict[str, list[Obj]] = field(default_factory=dict)
    """Claim key → the PVs of its class (assumed versions) it could take: unclaimed or
    pre-bound to it. Upstream keeps the whole class per class name; the rest fail its
    claimRef check, so leaving them out changes no answer and costs no walk over them."""
    candidates: dict[str, ClaimCandidates | SelectorError] = field(default_factory=dict)
    """Claim key → its candidate PVs (or why its selector is invalid), filled at the first
    Filter that matches it: the node-independent part of the matching, once per cycle."""

    facts: VolumeFacts | None = None
    """The binder's parsed PVs, shared by its cycles."""

    def candidates_of(self, pvc: Obj) -> ClaimCandidates:
        """Raises SelectorError for a claim selector the API would reject."""
        key = claim_key(pvc)
        found = self.candidates.get(key)
        if found is None:
            try:
                found = matching_candidates(pvc, self.unbound_volumes_delay_binding.get(key, ()),
                                            self.facts)
            except SelectorError as exc:
                found = exc
            self.candidates[key] = found
        if isinstance(found, SelectorError):
            raise found
        return found


Sleep = Callable[[float], Awaitable[None]]


class VolumeBinder:
    """One per VolumeBinding plugin instance (so per profile), like upstream's volumeBinder."""

    def __init__(self, *, objects: ObjectLister, client: ClusterClient, bind_timeout: float,
                 node_labels: Callable[[str], Mapping[str, str] | None], clock: Callable[[], float],
                 sleep: Sleep = asyncio.sleep) -> None:
        self.objects = objects
        self.node_labels = node_labels
        """A node's labels by name (None: no such node), read when checking the bindings."""
        self.client = client
        self.bind_timeout = bind_timeout
        self.clock = clock
        self.sleep = sleep
        self.pv_cache = PVAssumeCache(objects=objects)
        self.pvc_cache = PVCAssumeCache(objects=objects)
        self.volume_facts = VolumeFacts()

    # -- PreFilter -------------------------------------------------------------------------

    def get_pod_volume_claims(self, pod: Obj) -> PodVolumeClaims:
        namespace = (pod.get("metadata") or {}).get("namespace") or "default"
        claims = PodVolumeClaims(facts=self.volume_facts)
        for claim_name, _ in pod_claims(pod):
            pvc = self.pvc_cache.get(f"{namespace}/{claim_name}")
            if pvc is None:
                raise VolumeBindingError(f'error getting PVC "{namespace}/{claim_name}": not found')
            if is_pvc_fully_bound(pvc):
                claims.bound_claims.append(pvc)
            elif self._is_delay_binding(pvc) and not (pvc.get("spec") or {}).get("volumeName"):
                claims.unbound_claims_delay_binding.append(pvc)
            else:
                claims.unbound_claims_immediate.append(pvc)
        for pvc in claims.unbound_claims_delay_binding:
            meta = pvc.get("metadata") or {}
            claims.unbound_volumes_delay_binding[claim_key(pvc)] = self.pv_cache.list_pvs_for_claim(
                claim_class(pvc), (meta.get("namespace") or "", meta.get("name") or ""))
        return claims

    def _is_delay_binding(self, pvc: Obj) -> bool:
        class_name = claim_class(pvc)
        return bool(class_name) and is_delay_binding_mode(pvc, self.objects.get("StorageClass", class_name))

    # -- Filter ----------------------------------------------------------------------------

    def find_pod_volumes(self, claims: PodVolumeClaims, node: Obj) -> tuple[PodVolumes, list[str]]:
        """(the bindings this node needs, why the node cannot be used: empty when it can).
        Raises VolumeBindingError when a claim cannot be judged at all."""
        node_name = name_of(node)
        labels = (node.get("metadata") or {}).get("labels") or {}
        volumes = PodVolumes()
        bound_satisfied = unbound_satisfied = sufficient_storage = bound_pvs_found = True
        if claims.bound_claims:
            bound_satisfied, bound_pvs_found = self._check_bound_claims(claims.bound_claims, labels)
        to_provision: list[Obj] = []
        to_match: list[Obj] = []
        fast_fail = False
        for pvc in claims.unbound_claims_delay_binding:
            selected = annotations_of(pvc).get(ANN_SELECTED_NODE)
            if selected is None:
                to_match.append(pvc)
            elif selected != node_name:
                unbound_satisfied, fast_fail = False, True  # provisioning already started elsewhere
                break
            else:
                to_provision.append(pvc)
        if not fast_fail and to_match:
            unbound_satisfied, volumes.static_bindings, unmatched = self._find_matching_volumes(
                to_match, claims, labels)
            to_provision.extend(unmatched)
        if not fast_fail and to_provision:
            unbound_satisfied, sufficient_storage, volumes.dynamic_provisions, volumes.node_capacities = (
                self._check_volume_provisions(to_provision, labels))
        reasons = [reason for ok, reason in ((bound_satisfied, ERR_REASON_NODE_CONFLICT),
                                             (unbound_satisfied, ERR_REASON_BIND_CONFLICT),
                                             (sufficient_storage, ERR_REASON_NOT_ENOUGH_SPACE),
                                             (bound_pvs_found, ERR_REASON_PV_NOT_EXIST)) if not ok]
        return volumes, reasons

    def node_independent(self, claims: PodVolumeClaims) -> bool:
        """Whether `find_pod_volumes` gives every node the same answer: no delayed claim names
        a selected node, no bound PV or candidate PV has a required node affinity, and no class
        to provision from restricts topology or has its capacity checked. Raises nothing: a
        claim that cannot be judged is judged the same way on every node."""
        for pvc in claims.bound_claims:
            pv = self.pv_cache.get((pvc.get("spec") or {}).get("volumeName") or "")
            if pv is not None and ((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required") is not None:
                return False
        for pvc in claims.unbound_claims_delay_binding:
            if ANN_SELECTED_NODE in annotations_of(pvc):
                return False
            try:
                if claims.candidates_of(pvc).depends_on_node():
                    return False
            except SelectorError:
                pass
            storage_class = self.objects.get("StorageClass", claim_class(pvc)) if claim_class(pvc) else None
            if storage_class is None:
                continue
            if storage_class.get("allowedTopologies"):
                return False
            if "storage" in (((pvc.get("spec") or {}).get("resources") or {}).get("requests") or {}):
                driver = self.objects.get("CSIDriver", storage_class.get("provisioner") or "")
                if driver is not None and (driver.get("spec") or {}).get("storageCapacity"):
                    return False
        return True

    def _check_bound_claims(self, claims: list[Obj], labels: Mapping[str, str]) -> tuple[bool, bool]:
        """(every bound PV's node affinity fits, every bound PV exists); stops at the first miss."""
        for pvc in claims:
            pv = self.pv_cache.get((pvc.get("spec") or {}).get("volumeName") or "")
            if pv is None:
                return True, False
            if not check_node_affinity(pv, labels):
                return False, True
        return True, True

    def _find_matching_volumes(self, claims: list[Obj], claim_state: PodVolumeClaims,
                               labels: Mapping[str, str]) -> tuple[bool, list[BindingInfo], list[Obj]]:
        """Smallest claims first, so each gets the smallest PV that fits; a PV goes to one claim."""
        chosen: dict[str, Obj] = {}
        bindings: list[BindingInfo] = []
        unmatched: list[Obj] = []
        for pvc in sorted(claims, key=requested_storage):
            try:
                pv = pick_matching_volume(claim_state.candidates_of(pvc), labels, chosen)
            except SelectorError as exc:
                raise VolumeBindingError(f'error creating internal label selector for claim: "{claim_key(pvc)}": '
                                         f"{exc}") from exc
            if pv is None:
                unmatched.append(pvc)
                continue
            chosen[name_of(pv)] = pv
            bindings.append(BindingInfo(pvc=pvc, pv=pv))
        return not unmatched, bindings, unmatched

    def _check_volume_provisions(self, claims: list[Obj], labels: Mapping[str, str],
                                 ) -> tuple[bool, bool, list[Obj], list[Obj | None]]:
        """(provisioning allowed on this node, enough capacity, the claims to provision, the
        capacity object found for each).

        Capacity is checked as upstream's hasEnoughCapacity: only for provisioners whose
        CSIDriver sets `storageCapacity`, against the CSIStorageCapacity objects of the claim's
        class whose nodeTopology selects the node."""
        capacities: list[Obj | None] = []
        for pvc in claims:
            class_name = claim_class(pvc)
            if not class_name:
                raise VolumeBindingError(f'no class for claim "{claim_key(pvc)}"')
            storage_class = self.objects.get("StorageClass", class_name)
            if storage_class is None:
                raise VolumeBindingError(f'failed to find storage class "{class_name}"')
            provisioner = storage_class.get("provisioner") or ""
            if not provisioner or provisioner == NOT_SUPPORTED_PROVISIONER:
                return False, True, [], []
            if not match_topology_selector_terms(storage_class.get("allowedTopologies"), labels):
                return False, True, [], []
            sufficient, capacity = self._has_enough_capacity(provisioner, pvc, class_name, labels)
            if not sufficient:
                return True, False, [], []
            capacities.append(capacity)
        return True, True, list(claims), capacities

    def _has_enough_capacity(self, provisioner: str, pvc: Obj, class_name: str,
                             labels: Mapping[str, str]) -> tuple[bool, Obj | None]:
        """(enough room, the first CSIStorageCapacity that has it; None when not checked)."""
        if "storage" not in (((pvc.get("spec") or {}).get("resources") or {}).get("requests") or {}):
            return True, None  # no capacity to check for
        driver = self.objects.get("CSIDriver", provisioner)
        if driver is None or not (driver.get("spec") or {}).get("storageCapacity"):
            return True, None  # not a CSI driver, or one that does not publish capacity
        size = math.ceil(requested_storage(pvc))
        found = next((capacity for capacity in self.objects.list("CSIStorageCapacity")
                      if capacity.get("storageClassName") == class_name and _capacity_sufficient(capacity, size)
                      and _node_has_access(capacity, labels)), None)
        return found is not None, found

    # -- Reserve / Unreserve ------------------------------------------------------------------

    def assume_pod_volumes(self, pod: Obj, node_name: str, volumes: PodVolumes) -> bool:
        """Overlay the node's bindings in the assume caches; True when every claim is bound
        already (PreBind then has nothing to do). `volumes` is updated to the assumed objects."""
        if self._are_pod_volumes_bound(pod):
            return True
        bindings: list[BindingInfo] = []
        try:
            for binding in volumes.static_bindings:
                pv, dirty = bind_volume_to_claim(binding.pv, binding.pvc)
                if dirty:
                    self.pv_cache.assume(pv)
                bindings.append(BindingInfo(pvc=binding.pvc, pv=pv))
        except (LookupError, ValueError) as exc:
            self._revert_pvs(bindings)
            raise VolumeBindingError(str(exc)) from exc
        provisions: list[Obj] = []
        try:
            for pvc in volumes.dynamic_provisions:
                annotated = with_selected_node(pvc, node_name)
                self.pvc_cache.assume(annotated)
                provisions.append(annotated)
        except (LookupError, ValueError) as exc:
            self._revert_pvs(bindings)
            self._revert_pvcs(provisions)
            raise VolumeBindingError(str(exc)) from exc
        volumes.static_bindings = bindings
        volumes.dynamic_provisions = provisions
        return False

    def _are_pod_volumes_bound(self, pod: Obj) -> bool:
        namespace = (pod.get("metadata") or {}).get("namespace") or "default"
        for claim_name, _ in pod_claims(pod):
            pvc = self.pvc_cache.get(f"{namespace}/{claim_name}")
            if pvc is None or not is_pvc_fully_bound(pvc):
                return False
        return True

    def revert_assumed_pod_volumes(self, volumes: PodVolumes) -> None:
        self._revert_pvs(volumes.static_bindings)
        self._revert_pvcs(volumes.dynamic_provisions)

    def _revert_pvs(self, bindings: list[BindingInfo]) -> None:
        for binding in bindings:
            self.pv_cache.restore(name_of(binding.pv))

    def _revert_pvcs(self, claims: list[Obj]) -> None:
        for pvc in claims:
            self.pvc_cache.restore(claim_key(pvc))

    # -- PreBind ----------------------------------------------------------------------------

    async def bind_pod_volumes(self, pod: Obj, node_name: str, volumes: PodVolumes) -> None:
        """Write the bindings, then poll until the PV controller has bound every claim, at most
        `bind_timeout` seconds. Raises VolumeBindingError on failure or timeout."""
        await self._bind_api_update(volumes)
        polls = max(math.ceil(self.bind_timeout / POLL_INTERVAL_SECONDS), 0)
        deadline = self.clock() + self.bind_timeout
        for attempt in range(polls + 1):
            if self._check_bindings(node_name, volumes):
                return
            if attempt == polls or self.clock() >= deadline:
                break
            await self.sleep(POLL_INTERVAL_SECONDS)
        raise VolumeBindingError("binding volumes: context deadline exceeded")

    async def _bind_api_update(self, volumes: PodVolumes) -> None:
        """PV claimRefs first, then PVC selected-node annotations; the assumptions not yet written
        are reverted when a write fails (there is no API rollback of the written ones)."""
        bindings, provisions = volumes.static_bindings, volumes.dynamic_provisions
        done_bindings = done_provisions = 0
        try:
            for binding in bindings:
                written = await self.client.patch_object(kind=PV, obj=binding.pv, patch=_pv_binding_patch(binding.pv))
                binding.pv = written or binding.pv
                done_bindings += 1
            for i, pvc in enumerate(provisions):
                written = await self.client.patch_object(kind=PVC, obj=pvc, patch=_pvc_provisioning_patch(pvc))
                provisions[i] = written or pvc
                done_provisions += 1
        except Exception as exc:
            raise VolumeBindingError(str(exc)) from exc
        finally:
            self._revert_pvs(bindings[done_bindings:])
            self._revert_pvcs(provisions[done_provisions:])

    def _check_bindings(self, node_name: str, volumes: PodVolumes) -> bool:
        """True when every claim the pod's bindings touched is fully bound. Reads the API objects,
        not the assume caches, which later cycles may have overlaid again. Raises when binding
        went wrong in a way only a new scheduling attempt can fix."""
        node = self._node_labels(node_name)
        for binding in volumes.static_bindings:
            pv = self.pv_cache.get_api(name_of(binding.pv))
            pvc = self.pvc_cache.get_api(claim_key(binding.pvc))
            if pv is None:
                raise VolumeBindingError(f'binding volumes: failed to check binding: PV "{name_of(binding.pv)}" '
                                         "not found")
            if pvc is None:
                raise VolumeBindingError(f'binding volumes: failed to check binding: PVC "{claim_key(binding.pvc)}" '
                                         "not found")
            if _older(pv, binding.pv):
                return False  # our write has not reached the watch yet
            if not check_node_affinity(pv, node):
                raise VolumeBindingError(f'binding volumes: pv "{name_of(pv)}" node affinity doesn\'t match node '
                                         f'"{node_name}": no matching NodeSelectorTerms')
            claim_ref = (pv.get("spec") or {}).get("claimRef")
            if not claim_ref or (uid_of(binding.pvc) and not claim_ref.get("uid")):
                raise VolumeBindingError(f'binding volumes: ClaimRef got reset for pv "{name_of(pv)}"')
            if not is_pvc_fully_bound(pvc):
                return False
        for claim in volumes.dynamic_provisions:
            pvc = self.pvc_cache.get_api(claim_key(claim))
            if pvc is None:
                raise VolumeBindingError(f'binding volumes: failed to check provisioning pvc: PVC "{claim_key(claim)}" '
                                         "not found")
            if _older(pvc, claim):
                return False
            if annotations_of(pvc).get(ANN_SELECTED_NODE) != node_name:
                # The provisioner removes the annotation when provisioning failed.
                raise VolumeBindingError(f'binding volumes: provisioning failed for PVC "{name_of(pvc)}"')
            volume_name = (pvc.get("spec") or {}).get("volumeName")
            if volume_name:
                pv = self.pv_cache.get_api(volume_name)
                if pv is None:
                    return False  # not seen yet; a deleted PV unbinds the claim eventually
                if not check_node_affinity(pv, node):
                    raise VolumeBindingError(f'binding volumes: pv "{volume_name}" node affinity doesn\'t match '
                                             f'node "{node_name}": no matching NodeSelectorTerms')
            if not is_pvc_fully_bound(pvc):
                return False
        return True

    def _node_labels(self, node_name: str) -> Mapping[str, str]:
        labels = self.node_labels(node_name)
        if labels is None:
            raise VolumeBindingError(f'binding volumes: failed to get node "{node_name}": not found')
        return labels


def _pv_binding_patch(pv: Obj) -> Obj:
    """What Reserve changed on the PV: its claimRef and, unless pre-bound by the user, the
    bound-by-controller annotation; the resourceVersion makes the write fail on a stale PV
    as upstream's Update does."""
    meta: Obj = {}
    if ANN_BOUND_BY_CONTROLLER in annotations_of(pv):
        meta["annotations"] = {ANN_BOUND_BY_CONTROLLER: annotations_of(pv)[ANN_BOUND_BY_CONTROLLER]}
    if (pv.get("metadata") or {}).get("resourceVersion"):
        meta["resourceVersion"] = pv["metadata"]["resourceVersion"]
    patch: Obj = {"spec": {"claimRef": (pv.get("spec") or {}).get("claimRef")}}
    if meta:
        patch = {"metadata": meta, **patch}
    return patch


def _pvc_provisioning_patch(pvc: Obj) -> Obj:
    meta: Obj = {"annotations": {ANN_SELECTED_NODE: annotations_of(pvc)[ANN_SELECTED_NODE]}}
    if (pvc.get("metadata") or {}).get("resourceVersion"):
        meta["resourceVersion"] = pvc["metadata"]["resourceVersion"]
    return {"metadata": meta}


def _older(api: Obj, written: Obj) -> bool:
    api_rv, written_rv = resource_version(api), resource_version(written)
    return api_rv is not None and written_rv is not None and written_rv > api_rv

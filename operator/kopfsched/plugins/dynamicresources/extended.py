"""Extended resources backed by DRA (DRAExtendedResource, GA and locked on in v1.37; upstream's
extendeddynamicresources.go).

A pod asking for an extended resource (`example.com/gpu: 1` in a container's requests) that a
DeviceClass provides (its `spec.extendedResourceName`, or the implicit
`deviceclass.resource.kubernetes.io/<class>`) gets it from DRA devices on a node that does not
advertise it in `status.allocatable`. The plugin then works on one more claim, the pod's
"special" claim, after the pod's own:

- PreFilter: the claim made for the pod in an earlier cycle (annotated
  `resource.kubernetes.io/extended-resource-claim: "true"`, controlled by the pod), or else one
  in memory named `<extended-resources>`, with no requests yet.
- Filter: per node, the requests the node needs from DRA (`requests_and_mappings`): one
  ExactCount request of the resource's class per container, `container-<i>-request-<j>` (i the
  container's index among init containers then containers, j the resource's index among the
  container's sorted request names); classic init containers reuse the requests of the
  containers that start after them, and share the largest of their own. A claim left over from
  an earlier cycle is `cannot schedule extended resource claim` everywhere (PostFilter deletes
  it); a DRA-named resource that no class backs and the node lacks is `cannot fit resource`.
- PreBind: the claim is created (generateName `<pod>-extended-resources-`, owned by the pod),
  allocated and reserved as any claim, and the pod's `status.extendedResourceClaimStatus`
  records the claim's name and which container's resource maps to which request.
- Unreserve deletes a claim PreBind created.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

from kopfsched.framework.quantity import QuantityError, parse_quantity
from kopfsched.framework.types import Obj, PodInfo
from kopfsched.plugins.dynamicresources.manager import DEVICE_CLASS_PREFIX
from kopfsched.plugins.noderesources.resource_allocation import is_extended_resource_name

SPECIAL_CLAIM_NAME = "<extended-resources>"
"""The in-memory claim's name (upstream's specialClaimInMemName): never a valid claim name."""
ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
"""resourceapi.ExtendedResourceClaimAnnotation; its one valid value is "true"."""


def is_dra_extended_resource_name(name: str) -> bool:
    """upstream schedutil.IsDRAExtendedResourceName: an extended resource name, or a class's implicit one."""
    return is_extended_resource_name(name) or name.startswith(DEVICE_CLASS_PREFIX)


def dra_requests(pod: PodInfo) -> dict[str, int]:
    """The pod's non-zero requests of DRA-extended resource names, by name."""
    return {name: quantity for name, quantity in pod.requests.scalar.items()
            if quantity and is_dra_extended_resource_name(name)}


def find_claim(pod: PodInfo, claims: list[Obj]) -> Obj | None:
    """The claim an earlier cycle made for the pod (findExtendedResourceClaim): annotated, and
    controlled by the pod (name and UID)."""
    for claim in claims:
        meta = claim.get("metadata") or {}
        if (meta.get("annotations") or {}).get(ANNOTATION) != "true":
            continue
        for ref in meta.get("ownerReferences") or ():
            if ref.get("name") == pod.name and ref.get("controller") and ref.get("uid") == pod.uid:
                return claim
    return None


def in_memory_claim(pod: PodInfo) -> Obj:
    """The claim PreFilter makes when there is none yet: no requests, a temporary UID."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {
        "namespace": pod.namespace, "name": SPECIAL_CLAIM_NAME, "uid": str(uuid.uuid4()),
        "generateName": f"{pod.name}-extended-resources-",
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid,
                             "controller": True}],
        "annotations": {ANNOTATION: "true"}}, "spec": {}}


def node_claim(claim: Obj, requests: list[Obj]) -> Obj:
    """The claim as one node needs it: with `requests` (none: no `requests` field, as upstream
    writes a nil list)."""
    out = copy.deepcopy(claim)
    out["spec"] = {**(out.get("spec") or {}), "devices": {"requests": requests} if requests else {}}
    return out


def creation_body(claim: Obj) -> Obj:
    """What PreBind creates: the node's claim without name, UID and status."""
    meta = {k: v for k, v in (claim.get("metadata") or {}).items() if k not in ("name", "uid", "finalizers")}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta,
            "spec": copy.deepcopy(claim.get("spec") or {})}


def _int64(value: Any) -> int | None:
    """resource.Quantity.AsInt64: the value when it is a whole number, else None."""
    try:
        amount: Fraction = parse_quantity(value)
    except (QuantityError, TypeError, ValueError):
        return None
    return int(amount) if amount.denominator == 1 and -(2**63) <= amount < 2**63 else None


def _container_request(index: int, container: Mapping[str, Any], resource: str, class_name: str,
                       reusable: list[Obj | None]) -> tuple[Obj | None, list[Obj]]:
    """createResourceRequestAndMappings: the container's request for the resource (None when
    the container asks for none, or `reusable` requests of later containers cover it)."""
    requests = (container.get("resources") or {}).get("requests")
    if not requests or resource not in requests:
        return None, []
    wanted = _int64(requests[resource])
    if not wanted:
        return None, []
    name = container.get("name") or ""
    mappings: list[Obj] = []
    covered = 0
    for request in reusable:
        if request is not None:
            covered += request["exactly"]["count"]
            mappings.append({"containerName": name, "resourceName": resource, "requestName": request["name"]})
            if covered >= wanted:
                return None, mappings
    position = sorted(requests).index(resource)
    request_name = f"container-{index}-request-{position}"
    mappings.append({"containerName": name, "resourceName": resource, "requestName": request_name})
    return {"name": request_name, "exactly": {"deviceClassName": class_name, "allocationMode": "ExactCount",
                                              "count": wanted - covered}}, mappings


def requests_and_mappings(pod: Mapping[str, Any], resources: list[str],
                          class_of: Callable[[str], Obj | None]) -> tuple[list[Obj], list[Obj]]:
    """upstream createRequestsAndMappings: the device requests for the extended `resources` a
    node needs from DRA, sorted by name, and the container -> request mappings."""
    spec = pod.get("spec") or {}
    init = list(spec.get("initContainers") or ())
    containers = init + list(spec.get("containers") or ())
    short_lived = [i for i, c in enumerate(containers) if i < len(init) and c.get("restartPolicy") != "Always"]
    long_lived = [i for i in range(len(containers)) if i not in short_lived]
    device_requests: list[Obj] = []
    mappings: list[Obj] = []
    for resource in sorted(resources):
        device_class = class_of(resource)
        if device_class is None:
            continue
        class_name = (device_class.get("metadata") or {}).get("name") or ""
        long_requests: list[Obj | None] = [None] * len(containers)
        long_mappings: list[Obj] = []
        for i in long_lived:
            long_requests[i], found = _container_request(i, containers[i], resource, class_name, [])
            long_mappings += found
        largest: Obj | None = None
        short_names: set[str] = set()
        short_mappings: list[Obj] = []
        for i in short_lived:
            request, found = _container_request(i, containers[i], resource, class_name, long_requests[i:])
            if request is not None:
                short_names.add(request["name"])
                if largest is None or largest["exactly"]["count"] < request["exactly"]["count"]:
                    largest = request
            short_mappings += found
        if largest is not None and len(short_names) > 1:
            short_names.discard(largest["name"])
            for mapping in short_mappings:
                if mapping["requestName"] in short_names:
                    mapping["requestName"] = largest["name"]
        if largest is not None:
            device_requests.append(largest)
        device_requests += [request for request in long_requests if request is not None]
        mappings += long_mappings + short_mappings
    device_requests.sort(key=lambda request: request["name"])
    return device_requests, mappings

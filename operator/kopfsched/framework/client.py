"""ClusterClient: every side effect the scheduler has on the cluster, behind one protocol.

Two implementations: the kubernetes-asyncio one in the kube layer, and an in-memory one
(kopfsched.simulate.client) used by simulate, bench and unit tests. So the same
scheduler code runs in a cluster, offline and in benchmarks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

Obj = dict[str, Any]


class ClusterError(Exception):
    """An API call failed."""


class ConflictError(ClusterError):
    """409: e.g. the pod is already bound (another scheduler won)."""


class NotFoundError(ClusterError):
    """404: the object is gone."""


class ClusterClient(Protocol):
    async def bind(self, *, pod: Obj, node_name: str) -> None:
        """POST pods/binding. Raises ConflictError when the pod is already bound."""

    async def patch_pod_status(self, *, pod: Obj, condition: Obj | None = None,
                               nominated_node_name: str | None = None,
                               extended_resource_claim_status: Obj | None = None) -> None:
        """Set the PodScheduled condition and/or status.nominatedNodeName ('' clears it), and/or
        status.extendedResourceClaimStatus (DynamicResources' PreBind, DRAExtendedResource)."""

    async def delete_pod(self, *, pod: Obj, condition: Obj | None = None) -> None:
        """Delete a preemption victim, first marking it with a DisruptionTarget condition."""

    async def record_event(self, *, regarding: Obj, type: str, reason: str, action: str, message: str,
                           reporting_controller: str) -> None:
        """Post (or aggregate into a series) an events.k8s.io/v1 Event."""

    async def patch_object(self, *, kind: str, obj: Obj, patch: Mapping[str, Any]) -> Obj:
        """Merge-patch a PersistentVolume or PersistentVolumeClaim (volume binding), or a
        ResourceClaim (a patch of `status` goes to its status subresource)."""

    async def create_object(self, *, kind: str, obj: Obj) -> Obj:
        """Create a ResourceClaim (the claim for a pod's DRA-backed extended resources); a
        `metadata.generateName` gets its suffix as the API server gives it. Returns the object
        created."""

    async def delete_object(self, *, kind: str, obj: Obj) -> None:
        """Delete a ResourceClaim. Raises NotFoundError when it is gone already."""

"""DefaultBinder: binds the pod through the `pods/binding` subresource."""

from __future__ import annotations

from typing import Any

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.handle import Handle
from kopfsched.framework.registry import PluginFactory
from kopfsched.framework.status import Status
from kopfsched.framework.types import PodInfo


class DefaultBinder:
    name = "DefaultBinder"

    def __init__(self, args: Any, handle: Handle) -> None:
        self.handle = handle

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        try:
            await self.handle.client.bind(pod=pod.pod, node_name=node_name)
        except Exception as exc:  # The scheduler reads the cause (e.g. ConflictError) from status.error.
            return Status.as_error(exc)
        return None


PLUGIN = PluginFactory(name=DefaultBinder.name, factory=DefaultBinder)

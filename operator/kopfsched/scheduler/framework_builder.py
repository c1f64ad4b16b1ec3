"""Turning a validated ProfileConfig into a running Framework."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kopfsched.config.types import ProfileConfig
from kopfsched.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, EventResource
from kopfsched.framework.handle import Handle
from kopfsched.framework.registry import Registry
from kopfsched.framework.runtime import Framework, Observer
from kopfsched.queue.profile import QueueProfile
from kopfsched.scheduler.extender import EXTENDER_NAME

EXTENDER_EVENTS = [ClusterEventWithHint(ClusterEvent(EventResource.WILDCARD, ActionType.ALL))]
"""Extenders register no events: a pod they rejected is requeued by any event (as upstream)."""


def build_framework(config: ProfileConfig, *, registry: Registry, handle: Handle,
                    observe: Observer | None = None) -> Framework:
    """One plugin instance per name, shared by every extension point it is enabled at."""
    instances: dict[str, Any] = {}
    for name in config.plugin_names():
        factory = registry.get(name)
        if factory is None:  # validation guarantees this cannot happen
            raise KeyError(f"plugin {name!r} is not registered")
        args = config.plugin_args.get(name)
        if args is None and factory.args_type is not None:
            args = factory.decode_args(None)
        instances[name] = factory.new(args, handle)
    plugins = {
        point: [(instances[ref.name], ref.weight or 1) for ref in refs]
        for point, refs in config.plugins.items()
    }
    return Framework(
        profile_name=config.scheduler_name,
        plugins=plugins,
        handle=handle,
        percentage_of_nodes_to_score=config.percentage_of_nodes_to_score,
        observe=observe,
    )


def queue_profile(config: ProfileConfig, fwk: Framework) -> QueueProfile:
    pre_enqueue: Callable | None = fwk.run_pre_enqueue_plugins if fwk.pre_enqueue_plugins else None
    hints = fwk.enqueue_hints()
    if config.extenders:
        hints = {**hints, EXTENDER_NAME: EXTENDER_EVENTS}
    return QueueProfile(
        pre_enqueue=pre_enqueue,
        initial_backoff=float(config.pod_initial_backoff_seconds),
        max_backoff=float(config.pod_max_backoff_seconds),
        hints=hints,
        name=config.scheduler_name,
    )

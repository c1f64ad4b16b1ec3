"""DefaultPreemption: evict lower-priority pods so that a pod that fits nowhere can run (upstream's plugin)."""

from kopfsched.framework.preemption import (
    MSG_NO_CANDIDATE,
    MSG_NO_VICTIMS,
    MSG_NOT_ELIGIBLE_NEVER,
    MSG_NOT_ELIGIBLE_TERMINATING,
    MSG_NOT_HELPFUL,
    Candidate,
    Evaluator,
)
from kopfsched.framework.registry import PluginFactory
from kopfsched.plugins.defaultpreemption.plugin import NAME, DefaultPreemption, DefaultPreemptionArgs

PLUGIN = PluginFactory(name=NAME, factory=DefaultPreemption, args_type=DefaultPreemptionArgs)

__all__ = [
    "MSG_NOT_ELIGIBLE_NEVER",
    "MSG_NOT_ELIGIBLE_TERMINATING",
    "MSG_NOT_HELPFUL",
    "MSG_NO_CANDIDATE",
    "MSG_NO_VICTIMS",
    "NAME",
    "PLUGIN",
    "Candidate",
    "DefaultPreemption",
    "DefaultPreemptionArgs",
    "Evaluator",
]

"""DefaultPreemption: evict lower-priority pods so that a pod that fits nowhere can run (upstream's
plugin), a thin adapter over kopfsched.framework.preemption's Evaluator."""

from kopfsched.framework.registry import PluginFactory
from kopfsched.plugins.defaultpreemption.plugin import NAME, DefaultPreemption, DefaultPreemptionArgs

PLUGIN = PluginFactory(name=NAME, factory=DefaultPreemption, args_type=DefaultPreemptionArgs)

__all__ = ["NAME", "PLUGIN", "DefaultPreemption", "DefaultPreemptionArgs"]

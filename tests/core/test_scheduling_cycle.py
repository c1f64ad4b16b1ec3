"""Regressions in the scheduling cycle against upstream's schedule_one.go."""

from __future__ import annotations

from tests.builders import make_node, make_pod, taint
from tests.core.harness import Harness


def _on_node_named(name: str) -> dict:
    """Required node affinity on metadata.name: NodeAffinity's PreFilter narrows to that node."""
    field = {"key": "metadata.name", "operator": "In", "values": [name]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [field]}]}}}


async def test_a_pod_narrowed_to_a_missing_node_waits_for_it_instead_of_retrying_forever():
    # Upstream puts the plugins whose PreFilterResult narrowed the nodes into the
    # diagnosis' UnschedulablePlugins, so the pod waits in the unschedulable pool for a
    # NodeAffinity event; with no rejector at all it would be retried as an error.
    h = Harness([make_node("n1")])
    h.add_pods(make_pod("p", affinity=_on_node_named("n9")))
    await h.settle()
    assert h.scheduler.queue.pending_counts() == {"active": 0, "backoff": 0, "unschedulable": 1, "gated": 0}
    attempt = h.recorder.last("p")
    assert attempt.result == "unschedulable"
    assert attempt.diagnosis.unschedulable_plugins == {"NodeAffinity"}
    assert h.condition("p")["message"] == (
        "0/1 nodes are available: 1 node(s) didn't satisfy plugin(s) [NodeAffinity]. "
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")
    h.handlers.on_node_upsert(make_node("n9"))
    await h.settle()
    assert h.node_of("p") == "n9"


async def test_narrowing_plugins_count_among_the_rejectors():
    h = Harness([make_node("n1", taints=[taint("dedicated", "gpu")]), make_node("n2")])
    h.add_pods(make_pod("p", affinity=_on_node_named("n1")))
    await h.settle()
    assert h.recorder.last("p").diagnosis.unschedulable_plugins == {"NodeAffinity", "TaintToleration"}

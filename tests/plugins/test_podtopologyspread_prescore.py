"""PodTopologySpread's PreScore and Score over snapshot rows (label codes, kept per-domain totals,
vectorised inclusion masks): the same state and scores as the loop over nodes, while pods come
and go and nodes are relabelled."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.labels import SelectorError
from kopfsched.framework.types import NodeInfo, PodInfo
from kopfsched.plugins.podtopologyspread import PodTopologySpread, PodTopologySpreadArgs, scoring
from kopfsched.plugins.podtopologyspread.common import (
    HONOR,
    IGNORE,
    LABEL_HOSTNAME,
    SCHEDULE_ANYWAY,
    Selector,
    TopologySpreadConstraint,
    filter_constraints,
    match_node_inclusion_policies,
    required_node_affinity,
)
from kopfsched.plugins.podtopologyspread.plugin import PRE_SCORE_STATE
from kopfsched.plugins.podtopologyspread.scoring import PreScoreState, init_pre_score_state, normalize, score_node
from kopfsched.testing import FakeObjects, make_handle
from tests.builders import make_node, make_pod, taint

ZONE = "topology.kubernetes.io/zone"
RACK = "test.kopfsched/rack"
GPU = "test.kopfsched/gpu"
KEYS = (ZONE, RACK, LABEL_HOSTNAME)


def _node(rng: random.Random, name: str) -> dict[str, Any]:
    labels: dict[str, str] = {}
    for key, values in ((ZONE, ("z0", "z1", "z2", "")), (RACK, ("r0", "r1", "")), (GPU, ("a", "b", "1", "7"))):
        if rng.random() < 0.8:
            labels[key] = rng.choice(values)
    node = make_node(name, labels=labels, taints=[taint("t", effect=rng.choice(("NoSchedule", "PreferNoSchedule")))]
                     if rng.random() < 0.2 else None)
    if rng.random() < 0.1:
        del node["metadata"]["labels"][LABEL_HOSTNAME]
    return node


def _expression(rng: random.Random) -> dict[str, Any]:
    key = rng.choice((ZONE, RACK, GPU))
    operator = rng.choice(("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"))
    if operator in ("Exists", "DoesNotExist"):
        return {"key": key, "operator": operator}
    if operator in ("Gt", "Lt"):
        return {"key": GPU, "operator": operator, "values": [str(rng.randrange(9))]}
    values = rng.sample(("z0", "z1", "r0", "a", "b", ""), rng.randrange(1, 3))
    return {"key": key, "operator": operator, "values": values}


def _affinity(rng: random.Random) -> dict[str, Any] | None:
    if rng.random() < 0.4:
        return None
    terms: list[dict[str, Any]] = []
    for _ in range(rng.randrange(0, 3)):
        term: dict[str, Any] = {"matchExpressions": [_expression(rng) for _ in range(rng.randrange(0, 3))]}
        if rng.random() < 0.1:
            term["matchFields"] = [{"key": "metadata.name", "operator": rng.choice(("In", "NotIn")),
                                    "values": [f"n{rng.randrange(12)}"]}]
        terms.append(term)
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


def _incoming(rng: random.Random, i: int) -> PodInfo:
    """A pod with ScheduleAnyway constraints of its own, or none (the system defaults then apply)."""
    own = []
    if rng.random() < 0.5:
        for key in rng.sample(KEYS, rng.randrange(1, 4)):
            own.append({"maxSkew": rng.randrange(1, 4), "topologyKey": key, "whenUnsatisfiable": SCHEDULE_ANYWAY,
                        "labelSelector": {"matchLabels": {"app": rng.choice("ab")}},
                        "nodeAffinityPolicy": rng.choice((HONOR, IGNORE)),
                        "nodeTaintsPolicy": rng.choice((HONOR, IGNORE))})
    extra: dict[str, Any] = {"topologySpreadConstraints": own} if own else {}
    return PodInfo(make_pod(f"in{i}", labels={"app": "a"},
                            node_selector={GPU: rng.choice(("a", "b"))} if rng.random() < 0.2 else None,
                            affinity=_affinity(rng),
                            tolerations=[{"key": "t", "operator": "Exists"}] if rng.random() < 0.3 else None,
                            **extra))


def _reference(plugin: PodTopologySpread, pod: PodInfo, feasible: list[NodeInfo],
               nodes: list[NodeInfo]) -> PreScoreState:
    """PreScore's state from the loop over nodes: domains node by node, every node's pods counted."""
    own = pod.spec.get("topologySpreadConstraints")
    state = PreScoreState(plugin.constraints(pod, SCHEDULE_ANYWAY), require_all_topologies=bool(own))
    init_pre_score_state(state, feasible)
    counted = [(i, c) for i, c in enumerate(state.constraints) if c.topology_key != LABEL_HOSTNAME]
    required = [c.topology_key for c in state.constraints] if state.require_all_topologies else []
    # A node of no row makes _domain_counts count node by node.
    counts = plugin._domain_counts([c for _, c in counted], pod, [*nodes, NodeInfo()], required_node_affinity(pod),
                                   required_keys=required)
    for (i, _), per_value in zip(counted, counts, strict=True):
        registered = state.topology_value_to_pod_counts[i]
        for value, n in per_value.items():
            if value in registered:
                registered[value] += n
    return state


@pytest.mark.parametrize(("first_few", "first_rows"), [(8, 64), (1, 64), (1, 3)],
                         ids=["first-rows-all", "first-few-some", "first-rows-some"])
def test_pre_score_rows_equal_the_loop_over_nodes(first_few: int, first_rows: int,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # With 1 or 3 first rows, they often miss a value: the domains' order then comes from more
    # rows, or from every row.
    monkeypatch.setattr(scoring, "FIRST_FEW_ROWS", first_few)
    monkeypatch.setattr(scoring, "FIRST_ROWS", first_rows)
    rng = random.Random(21)
    raw = [_node(rng, f"n{i}") for i in range(12)]
    nodes = [NodeInfo(n) for n in raw]
    service = {"kind": "Service", "metadata": {"name": "svc", "namespace": "default"},
               "spec": {"selector": {"app": "a"}}}
    handle = make_handle(nodes)
    handle.objects = FakeObjects([service])
    plugin = PodTopologySpread(PodTopologySpreadArgs(), handle)
    table = handle.snapshot.table
    placed: list[tuple[NodeInfo, PodInfo]] = []
    compared = scored = 0
    for step in range(600):
        draw = rng.random()
        if draw < 0.05:  # relabelled: new codes, masks and totals
            row = rng.randrange(len(nodes))
            nodes[row].set_node(_node(rng, f"n{row}"))
            table.refresh([row])
        elif placed and draw < 0.35:
            owner, gone = placed.pop(rng.randrange(len(placed)))
            owner.remove_pod(gone)
            table.refresh([nodes.index(owner)], node_static=False)
        else:
            owner = rng.choice(nodes)
            pod = PodInfo(make_pod(f"p{step}", rng.choice(("default", "other")), labels={"app": rng.choice("abc")}))
            owner.add_pod(pod)
            placed.append((owner, pod))
            table.refresh([nodes.index(owner)], node_static=False)
        incoming = _incoming(rng, step)
        rows = np.array(sorted(rng.sample(range(len(nodes)), rng.randrange(1, len(nodes) + 1))), dtype=np.int64)
        feasible = [nodes[r] for r in rows.tolist()]
        state = CycleState()
        try:
            status = plugin.pre_score(state, incoming, feasible)
        except SelectorError:
            try:
                required_node_affinity(incoming)
            except SelectorError:
                continue  # the node-by-node path raises as well
            raise
        if status is not None:
            continue
        fast = state.read(PRE_SCORE_STATE)
        slow = _reference(plugin, incoming, feasible, nodes)
        assert [list(d.items()) for d in fast.topology_value_to_pod_counts] == [
            list(d.items()) for d in slow.topology_value_to_pod_counts]
        assert fast.topology_normalizing_weight == slow.topology_normalizing_weight
        assert fast.ignored.tolist() == slow.ignored.tolist()
        assert fast.ignored_nodes == slow.ignored_nodes
        assert fast.some_ignored == slow.some_ignored
        compared += 1
        scores = plugin.score_nodes(state, incoming, table, rows)
        assert scores.tolist() == [score_node(slow, incoming, n) for n in feasible]
        assert fast.counted_at is not None  # Score read what PreScore counted; without it, the same
        fast.counted_at = None
        assert plugin.score_nodes(state, incoming, table, rows).tolist() == scores.tolist()
        assert normalize(fast, scores).tolist() == normalize(slow, scores).tolist()
        scored += sum(sum(d.values()) for d in slow.topology_value_to_pod_counts)
    assert compared > 300
    assert scored > 1000  # domains counted pods


def test_inclusion_masks_equal_the_node_by_node_policies() -> None:
    rng = random.Random(23)
    nodes = [NodeInfo(_node(rng, f"n{i}")) for i in range(12)]
    handle = make_handle(nodes)
    plugin = PodTopologySpread(PodTopologySpreadArgs(), handle)
    table = handle.snapshot.table
    selector = Selector.of({"matchLabels": {"app": "a"}})
    checked = 0
    for step in range(1500):
        if rng.random() < 0.05:
            row = rng.randrange(len(nodes))
            nodes[row].set_node(_node(rng, f"n{row}"))
            table.refresh([row])
        pod = _incoming(rng, step)
        try:
            affinity = required_node_affinity(pod)
        except SelectorError:
            continue
        c = TopologySpreadConstraint(1, ZONE, selector, node_affinity_policy=rng.choice((HONOR, IGNORE)),
                                     node_taints_policy=rng.choice((HONOR, IGNORE)))
        expected = [match_node_inclusion_policies(c, pod, n, affinity) for n in nodes]
        mask = plugin._inclusion_mask(c, pod, table, affinity)
        assert (mask.tolist() if mask is not None else [True] * len(nodes)) == expected
        assert plugin._compute_inclusion(c, pod, table, affinity).tolist() == expected
        checked += expected.count(False)
    assert checked > 1000  # nodes excluded


def _described(constraints: list[TopologySpreadConstraint]) -> list[tuple[Any, ...]]:
    return [(c.max_skew, c.topology_key, c.selector.signature, c.selector.empty, c.min_domains,
             c.node_affinity_policy, c.node_taints_policy) for c in constraints]


def test_own_constraints_parsed_once_equal_parsing_each_pod() -> None:
    rng = random.Random(25)
    plugin = PodTopologySpread(PodTopologySpreadArgs(), make_handle([]))
    shapes = []
    for _ in range(6):
        shape = []
        for key in rng.sample(KEYS, rng.randrange(1, 3)):
            c: dict[str, Any] = {"maxSkew": rng.randrange(1, 4), "topologyKey": key,
                                 "whenUnsatisfiable": rng.choice((SCHEDULE_ANYWAY, "DoNotSchedule")),
                                 "labelSelector": {"matchLabels": {"app": rng.choice("ab")}}}
            if rng.random() < 0.5:
                c["matchLabelKeys"] = ["rev"]
            if rng.random() < 0.2:
                c["labelSelector"] = {"matchLabels": {"app": "not a valid value!"}}
            shape.append(c)
        shapes.append(shape)
    merged = 0
    for i in range(400):
        labels = {"app": rng.choice("ab"), **({"rev": rng.choice("12")} if rng.random() < 0.7 else {})}
        pod = PodInfo(make_pod(f"p{i}", labels=labels, topologySpreadConstraints=rng.choice(shapes)))
        own = pod.spec["topologySpreadConstraints"]
        for action in (SCHEDULE_ANYWAY, "DoNotSchedule"):
            try:
                expected = _described(filter_constraints(own, pod.labels, action))
            except SelectorError:
                with pytest.raises(SelectorError):
                    plugin.constraints(pod, action)
                continue
            assert _described(plugin.constraints(pod, action)) == expected
            merged += sum("rev" in signature for _, _, signature, *_ in expected)
    assert merged > 100  # matchLabelKeys merged the pods' own labels

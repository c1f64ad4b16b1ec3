from typing import Any

import numpy as np
import pytest

from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.events import ActionType, EventResource, QueueingHint
from kopfsched.framework.interface import PreFilterResult
from kopfsched.framework.node_table import NodeTable
from kopfsched.framework.registry import ArgsError
from kopfsched.framework.status import Code, Status
from kopfsched.framework.types import NodeInfo, PodInfo
from kopfsched.plugins.nodeaffinity import PLUGIN, NodeAffinity, NodeAffinityArgs
from tests.builders import make_node, make_pod

POD_REASON = "node(s) didn't match Pod's node affinity/selector"
ENFORCED_REASON = "node(s) didn't match scheduler-enforced node affinity"
CONFLICT_REASON = "pod affinity terms conflict"


def expr(key: str, operator: str, *values: str) -> dict:
    e: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        e["values"] = list(values)
    return e


def name_in(*names: str) -> dict:
    return {"key": "metadata.name", "operator": "In", "values": list(names)}


def required(*terms: dict) -> dict:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def preferred(*weighted: tuple[int, dict]) -> dict:
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": w, "preference": term} for w, term in weighted]}}


def plugin_with(added: dict | None = None) -> NodeAffinity:
    args = PLUGIN.decode_args({"addedAffinity": added} if added is not None else None)
    return PLUGIN.new(args, None)


def run_filter(plugin: NodeAffinity, pod: dict, node: dict) -> tuple[PreFilterResult | Status | None, Status | None]:
    """(PreFilter's answer, Filter's status); Filter is not run when PreFilter skipped."""
    state, info = CycleState(), PodInfo(pod)
    pre = plugin.pre_filter(state, info, [])
    if isinstance(pre, Status):
        return pre, None
    return pre, plugin.filter(state, info, NodeInfo(node))


FILTER_CASES = [
    pytest.param({}, {}, None, id="no-selector"),
    pytest.param({"node_selector": {"foo": "bar"}}, {}, POD_REASON, id="missing-labels"),
    pytest.param({"node_selector": {"foo": "bar"}}, {"foo": "bar"}, None, id="same-labels"),
    pytest.param({"node_selector": {"foo": "bar"}}, {"foo": "bar", "baz": "blah"}, None, id="node-labels-superset"),
    pytest.param({"node_selector": {"foo": "bar", "baz": "blah"}}, {"foo": "bar"}, POD_REASON,
                 id="node-labels-subset"),
    pytest.param({"affinity": required({"matchExpressions": [expr("foo", "In", "bar", "value2")]})},
                 {"foo": "bar"}, None, id="in-matches"),
    pytest.param({"affinity": required({"matchExpressions": [expr("kernel-version", "Gt", "0204")]})},
                 {"kernel-version": "0206"}, None, id="gt-matches"),
    pytest.param({"affinity": required({"matchExpressions": [expr("mem-type", "NotIn", "DDR", "DDR2")]})},
                 {"mem-type": "DDR3"}, None, id="not-in-matches"),
    pytest.param({"affinity": required({"matchExpressions": [expr("GPU", "Exists")]})},
                 {"GPU": "NVIDIA-GRID-K1"}, None, id="exists-matches"),
    pytest.param({"affinity": required({"matchExpressions": [expr("foo", "In", "value1", "value2")]})},
                 {"foo": "bar"}, POD_REASON, id="in-does-not-match"),
    pytest.param({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}},
                 {"foo": "bar"}, POD_REASON, id="nil-terms-match-nothing"),
    pytest.param({"affinity": required()}, {"foo": "bar"}, POD_REASON, id="empty-terms-match-nothing"),
    pytest.param({"affinity": required({"matchExpressions": []})}, {"foo": "bar"}, POD_REASON,
                 id="empty-term-matches-nothing"),
    pytest.param({"affinity": {"podAffinity": {}}}, {"foo": "bar"}, None, id="affinity-without-node-affinity"),
    pytest.param({"affinity": required({"matchExpressions": [expr("GPU", "Exists"),
                                                             expr("GPU", "NotIn", "AMD", "INTER")]})},
                 {"GPU": "NVIDIA-GRID-K1"}, None, id="expressions-anded-match"),
    pytest.param({"affinity": required({"matchExpressions": [expr("GPU", "Exists"),
                                                             expr("GPU", "In", "AMD", "INTER")]})},
                 {"GPU": "NVIDIA-GRID-K1"}, POD_REASON, id="expressions-anded-fail"),
    pytest.param({"affinity": required({"matchExpressions": [expr("foo", "In", "bar", "value2")]},
                                       {"matchExpressions": [expr("diffkey", "In", "wrong", "value2")]})},
                 {"foo": "bar"}, None, id="terms-ored"),
    pytest.param({"node_selector": {"foo": "bar"}, "affinity": required({"matchExpressions": [expr("foo", "Exists")]})},
                 {"foo": "bar"}, None, id="selector-and-affinity-match"),
    pytest.param({"node_selector": {"foo": "bar"},
                  "affinity": required({"matchExpressions": [expr("foo", "In", "other")]})},
                 {"foo": "bar"}, POD_REASON, id="selector-matches-affinity-not"),
    pytest.param({"affinity": required({"matchExpressions": [expr("foo", "Bogus", "bar")]},
                                       {"matchExpressions": [expr("foo", "In", "bar")]})},
                 {"foo": "bar"}, None, id="invalid-term-ignored-when-another-matches"),
    pytest.param({"affinity": required({"matchExpressions": [expr("foo", "Bogus", "bar")]})},
                 {"foo": "bar"}, POD_REASON, id="invalid-term-matches-nothing"),
    pytest.param({"affinity": required({"matchFields": [{"key": "metadata.name", "operator": "NotIn",
                                                         "values": ["node1"]}]})},
                 {}, POD_REASON, id="match-fields-not-in"),
]


@pytest.mark.parametrize(("pod_kwargs", "labels", "reason"), FILTER_CASES)
def test_filter(pod_kwargs: dict, labels: dict, reason: str | None) -> None:
    pre, status = run_filter(plugin_with(), make_pod(**pod_kwargs), make_node("node1", labels=labels))
    if not pod_kwargs.get("node_selector") and "nodeAffinity" not in pod_kwargs.get("affinity", {}):
        assert pre is not None and pre.code is Code.SKIP  # Nothing to check: Filter is skipped.
        assert reason is None
        return
    if reason is None:
        assert status is None
    else:
        assert status is not None
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.reasons == (reason,)


@pytest.mark.parametrize(
    ("terms", "expected"),
    [
        pytest.param([{"matchFields": [name_in("node1")]}], PreFilterResult(frozenset({"node1"})), id="one-name"),
        pytest.param([{"matchFields": [name_in("node1")]}, {"matchFields": [name_in("node2")]}],
                     PreFilterResult(frozenset({"node1", "node2"})), id="names-united-across-terms"),
        pytest.param([{"matchFields": [name_in("node1")], "matchExpressions": [expr("foo", "Exists")]}],
                     PreFilterResult(frozenset({"node1"})), id="name-with-labels"),
        pytest.param([{"matchFields": [name_in("node1")]}, {"matchExpressions": [expr("foo", "Exists")]}],
                     None, id="term-without-names-allows-all"),
        pytest.param([{"matchFields": [name_in("node1"), name_in("node2")]}],
                     Status.unresolvable(CONFLICT_REASON), id="names-conflict"),
        pytest.param([{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["node1"]}]}],
                     None, id="not-in-names-nothing"),
    ],
)
def test_pre_filter_narrows_to_named_nodes(terms: list[dict], expected: Any) -> None:
    state = CycleState()
    assert plugin_with().pre_filter(state, PodInfo(make_pod(affinity=required(*terms))), []) == expected


@pytest.mark.parametrize(
    ("node_name", "reason"),
    [pytest.param("node1", None, id="named-node"), pytest.param("node2", POD_REASON, id="other-node")],
)
def test_filter_match_fields(node_name: str, reason: str | None) -> None:
    pod = make_pod(affinity=required({"matchFields": [name_in("node1")]}))
    _, status = run_filter(plugin_with(), pod, make_node(node_name))
    assert (status.reasons if status else None) == ((reason,) if reason else None)


ADDED_ZONE = {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchExpressions": [expr("zone", "In", "foo")]}]}}


@pytest.mark.parametrize(
    ("pod_kwargs", "labels", "reason"),
    [
        pytest.param({}, {"zone": "foo"}, None, id="enforced-matches"),
        pytest.param({}, {"zone": "bar"}, ENFORCED_REASON, id="enforced-does-not-match"),
        pytest.param({"node_selector": {"foo": "bar"}}, {"zone": "bar", "foo": "bar"}, ENFORCED_REASON,
                     id="enforced-checked-first"),
        pytest.param({"node_selector": {"foo": "bar"}}, {"zone": "foo"}, POD_REASON, id="pod-selector-too"),
    ],
)
def test_filter_added_affinity(pod_kwargs: dict, labels: dict, reason: str | None) -> None:
    pre, status = run_filter(plugin_with(ADDED_ZONE), make_pod(**pod_kwargs), make_node("n", labels=labels))
    assert pre is None  # Not skipped: the enforced selector applies to every pod.
    if reason is None:
        assert status is None
    else:
        assert status is not None
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.reasons == (reason,)


def score_all(plugin: NodeAffinity, pod: dict, labels: list[dict]) -> list[int] | None:
    state, info = CycleState(), PodInfo(pod)
    nodes = [NodeInfo(make_node(f"node{i}", labels=lbl)) for i, lbl in enumerate(labels)]
    status = plugin.pre_score(state, info, nodes)
    if status is not None:
        assert status.code is Code.SKIP
        return None
    raw = np.array([plugin.score(state, info, n) for n in nodes], dtype=np.int64)
    return plugin.normalize_score(state, info, raw).tolist()


FOO_BAR = {"matchExpressions": [expr("foo", "In", "bar")]}
KEY_VALUE = {"matchExpressions": [expr("key", "In", "value")]}
ALL_THREE = {"matchExpressions": [expr("foo", "In", "bar"), expr("key", "In", "value"), expr("az", "In", "az1")]}


@pytest.mark.parametrize(
    ("affinity", "added", "labels", "expected"),
    [
        pytest.param(None, None, [{"foo": "bar"}], None, id="nothing-to-score-skips"),
        pytest.param(preferred((2, FOO_BAR)), None, [{"key": "value"}, {"az": "az1"}], [0, 0], id="no-node-matches"),
        pytest.param(preferred((2, FOO_BAR)), None, [{"foo": "bar"}, {"key": "value"}, {"az": "az1"}],
                     [100, 0, 0], id="one-node-matches"),
        pytest.param(preferred((2, FOO_BAR), (4, KEY_VALUE), (5, ALL_THREE)), None,
                     [{"foo": "bar"}, {"foo": "bar", "key": "value", "az": "az1"}, {"key": "value"}],
                     [18, 100, 36], id="weights-summed-and-normalized"),
        pytest.param(preferred((0, FOO_BAR), (3, {"matchExpressions": []}), (1, KEY_VALUE)), None,
                     [{"foo": "bar"}, {"key": "value"}], [0, 100], id="zero-weight-and-empty-terms-ignored"),
        pytest.param(None, {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "preference": FOO_BAR}]},
                     [{"foo": "bar"}, {}], [100, 0], id="added-preferred-only"),
        pytest.param(preferred((5, KEY_VALUE)),
                     {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 3, "preference": FOO_BAR}]},
                     [{"foo": "bar"}, {"key": "value"}, {"foo": "bar", "key": "value"}], [37, 62, 100],
                     id="added-and-pod-preferred"),
    ],
)
def test_score(affinity: dict | None, added: dict | None, labels: list[dict], expected: list[int] | None) -> None:
    assert score_all(plugin_with(added), make_pod(affinity=affinity), labels) == expected


def test_pre_score_invalid_preferred_term_is_an_error() -> None:
    pod = make_pod(affinity=preferred((1, {"matchExpressions": [expr("foo", "Bogus")]})))
    status = plugin_with().pre_score(CycleState(), PodInfo(pod), [])
    assert status is not None
    assert status.code is Code.ERROR


@pytest.mark.parametrize(
    ("raw", "problem_paths"),
    [
        pytest.param({}, [], id="empty"),
        pytest.param({"addedAffinity": ADDED_ZONE}, [], id="valid"),
        pytest.param({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [expr("zone", "In")]}]}}},
            ["addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"], id="in-no-values"),
        pytest.param({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchFields": [{"key": "metadata.name", "operator": "Exists"}]}}]}},
            ["addedAffinity.preferredDuringSchedulingIgnoredDuringExecution"], id="bad-field-operator"),
        pytest.param({"addedAffinity": "zone=foo"}, ["addedAffinity"], id="not-an-object"),
        pytest.param({"unknown": 1}, ["unknown"], id="unknown-field"),
    ],
)
def test_args(raw: dict, problem_paths: list[str]) -> None:
    if not problem_paths:
        assert isinstance(PLUGIN.decode_args(raw), NodeAffinityArgs)
        return
    with pytest.raises(ArgsError) as error:
        PLUGIN.decode_args(raw)
    assert [path for path, _ in error.value.problems] == problem_paths


def test_default_args() -> None:
    assert PLUGIN.decode_args(None) == NodeAffinityArgs(added_affinity=None)


def test_events_to_register() -> None:
    (registration,) = plugin_with().events_to_register()
    assert registration.event.resource is EventResource.NODE
    assert registration.event.action == ActionType.ADD | ActionType.UPDATE_NODE_LABEL


@pytest.mark.parametrize(
    ("added", "old_labels", "new_labels", "hint"),
    [
        pytest.param(None, None, {"foo": "bar"}, QueueingHint.QUEUE, id="matching-node-added"),
        pytest.param(None, None, {"foo": "baz"}, QueueingHint.SKIP, id="non-matching-node-added"),
        pytest.param(None, {"foo": "baz"}, {"foo": "bar"}, QueueingHint.QUEUE, id="node-starts-matching"),
        pytest.param(None, {"foo": "bar"}, {"foo": "bar", "x": "y"}, QueueingHint.SKIP, id="node-matched-already"),
        pytest.param(None, {"foo": "bar"}, {}, QueueingHint.SKIP, id="node-stops-matching"),
        pytest.param(ADDED_ZONE, None, {"foo": "bar"}, QueueingHint.SKIP, id="node-fails-enforced-selector"),
        pytest.param(ADDED_ZONE, None, {"foo": "bar", "zone": "foo"}, QueueingHint.QUEUE,
                     id="node-passes-enforced-selector"),
    ],
)
def test_node_change_hint(added: dict | None, old_labels: dict | None, new_labels: dict, hint: QueueingHint) -> None:
    pod = PodInfo(make_pod(node_selector={"foo": "bar"}))
    old = None if old_labels is None else make_node("n", labels=old_labels)
    assert plugin_with(added).is_schedulable_after_node_change(pod, old, make_node("n", labels=new_labels)) is hint


BATCH_NODES = [
    ("node1", {"foo": "bar"}), ("node2", {}), ("node3", {"foo": "bar", "baz": "blah"}),
    ("node4", {"kernel-version": "0206"}), ("node5", {"kernel-version": "x"}), ("node6", {"mem-type": "DDR3"}),
    ("node7", {"GPU": "NVIDIA-GRID-K1"}), ("node8", {"GPU": "AMD", "zone": "foo"}), ("node9", {"zone": "bar"}),
]
BATCH_PODS = [case.values[0] for case in FILTER_CASES] + [
    {"affinity": required({"matchExpressions": [expr("kernel-version", "Lt", "300")]})},
    {"affinity": required({"matchExpressions": [expr("GPU", "DoesNotExist")]})},
    {"affinity": required({"matchFields": [name_in("node3")], "matchExpressions": [expr("foo", "Exists")]},
                          {"matchFields": [name_in("node7")]})},
    {"affinity": required({"matchFields": [{"key": "spec.other", "operator": "NotIn", "values": ["x"]}]})},
    {"node_selector": {"zone": "foo", "GPU": "AMD"}},
    {"node_selector": {"foo": "no-node-has-it"}},
]


@pytest.mark.parametrize("added", [None, ADDED_ZONE], ids=["pod-only", "added-affinity"])
@pytest.mark.parametrize("pod_kwargs", BATCH_PODS, ids=lambda kwargs: str(kwargs)[:60])
def test_batch_agrees_with_per_node(pod_kwargs: dict, added: dict | None) -> None:
    """filter_nodes' mask and filter_statuses' reasons are `filter`'s, node for node, for every
    operator, invalid and empty terms, matchFields and the scheduler-enforced selector; asked
    twice so that the selector's rows kept by the table are checked too."""
    nodes = [NodeInfo(make_node(name, labels=labels)) for name, labels in BATCH_NODES]
    table = NodeTable(nodes)
    plugin, pod = plugin_with(added), PodInfo(make_pod(**pod_kwargs))
    state = CycleState()
    if isinstance(plugin.pre_filter(state, pod, nodes), Status):
        return  # skipped or rejected at PreFilter: Filter never runs
    for rows in (np.arange(len(nodes)), np.array([8, 2, 6, 0]), np.arange(len(nodes)), np.array([], dtype=np.int64)):
        expected = [plugin.filter(state, pod, nodes[r]) for r in rows]
        passed = plugin.filter_nodes(state, pod, table, rows)
        assert passed.tolist() == [status is None for status in expected]
        rejected = rows[~passed]
        statuses = plugin.filter_statuses(state, pod, table, rejected)
        assert [(s.code, s.reasons) for s in statuses] == [(s.code, s.reasons) for s in expected if s is not None]


def test_batch_follows_label_changes() -> None:
    """The rows a selector matches are kept by the table: a node whose labels change is judged again."""
    nodes = [NodeInfo(make_node(f"n{i}", labels={"gpu": "a100" if i % 2 else "t4"})) for i in range(6)]
    table = NodeTable(nodes)
    plugin = plugin_with()
    pod = PodInfo(make_pod(affinity=required({"matchExpressions": [expr("gpu", "In", "a100")]})))
    state = CycleState()
    plugin.pre_filter(state, pod, nodes)
    rows = np.arange(6)
    for _ in range(2):  # the second call keeps the answer of every row
        assert plugin.filter_nodes(state, pod, table, rows).tolist() == [False, True] * 3
    nodes[0].set_node(make_node("n0", labels={"gpu": "a100"}))
    table.refresh([0])
    assert plugin.filter_nodes(state, pod, table, rows).tolist() == [True, True, False, True, False, True]

"""DefaultPreemption: eligibility, victim selection with PDBs, candidate ordering, messages, args.

Victim selection runs the default profile's real PreFilter/Filter plugins over NodeInfo
clones, as the scheduler does; side effects go to an in-memory client.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from kopfsched.config.defaults import default_profile
from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.handle import Handle, WaitingPod
from kopfsched.framework.interface import NodeToStatus, PostFilterResult
from kopfsched.framework.preemption import (
    Candidate,
    DisruptionBudget,
    calculate_num_candidates,
    filter_pods_with_pdb_violation,
    pick_one_node_for_preemption,
)
from kopfsched.framework.registry import ArgsError
from kopfsched.framework.status import Code, Status
from kopfsched.framework.types import NodeInfo, PodInfo
from kopfsched.plugins.defaultpreemption import PLUGIN, DefaultPreemption, DefaultPreemptionArgs
from kopfsched.plugins.registry import in_tree_registry
from kopfsched.queue.nominator import Nominator
from kopfsched.scheduler.framework_builder import build_framework
from kopfsched.simulate.client import InMemoryClusterClient
from kopfsched.testing import FakeObjects, FakeSnapshot
from tests.builders import make_node, make_pod, node_info, taint

NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
T0 = "2024-01-01T00:00:00Z"
T1 = "2024-01-01T01:00:00Z"


def running(name: str, *, cpu: str = "1", priority: int = 0, start: str | None = T0,
            labels: dict[str, str] | None = None, namespace: str = "default", **extra: Any) -> dict[str, Any]:
    pod = make_pod(name, namespace, requests={"cpu": cpu}, priority=priority, labels=labels, uid=name, **extra)
    pod["status"] = {"phase": "Running", **({"startTime": start} if start else {})}
    return pod


def preemptor(cpu: str = "2", priority: int = 10, **extra: Any) -> PodInfo:
    return PodInfo(make_pod("preemptor", requests={"cpu": cpu}, priority=priority, uid="preemptor", **extra))


def pdb(name: str, labels: dict[str, str], allowed: int, *, namespace: str = "default",
        disrupted: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": {"matchLabels": labels}},
            "status": {"disruptionsAllowed": allowed, "disruptedPods": {p: T0 for p in disrupted}}}


class FixedRng(random.Random):
    """randrange always answers `offset`: pins the dry run's random start node."""

    def __init__(self, offset: int) -> None:
        super().__init__(0)
        self.offset = offset

    def randrange(self, *args: Any, **kwargs: Any) -> int:
        return self.offset


class Client(InMemoryClusterClient):
    """Also records the condition each victim was deleted with and every status patch."""

    def __init__(self) -> None:
        super().__init__()
        self.delete_conditions: dict[str, dict[str, Any] | None] = {}
        self.patches: list[tuple[str, str | None]] = []

    async def delete_pod(self, *, pod: dict[str, Any], condition: dict[str, Any] | None = None) -> None:
        self.delete_conditions[pod["metadata"]["name"]] = condition
        await super().delete_pod(pod=pod, condition=condition)

    async def patch_pod_status(self, *, pod: dict[str, Any], condition: dict[str, Any] | None = None,
                               nominated_node_name: str | None = None) -> None:
        self.patches.append((pod["metadata"]["name"], nominated_node_name))
        await super().patch_pod_status(pod=pod, condition=condition, nominated_node_name=nominated_node_name)


_ENVS: list[Env] = []


@pytest.fixture(autouse=True)
def _close_unawaited_side_effects():
    yield
    for env in _ENVS:
        for coro in env.spawned:
            coro.close()
    _ENVS.clear()


class Env:
    """The default profile over fixed nodes, with DefaultPreemption's handle fakes."""

    def __init__(self, nodes: list[NodeInfo], *, pdbs: tuple[dict[str, Any], ...] = (), offset: int = 0,
                 args: DefaultPreemptionArgs | None = None) -> None:
        self.nodes = nodes
        self.client = Client()
        for node in nodes:
            for pod in node.iter_pods():
                self.client.add_pod(pod.pod)
        self.spawned: list[Any] = []
        _ENVS.append(self)
        self.nominator = Nominator()
        self.handle = Handle(snapshot=FakeSnapshot(nodes), client=self.client, objects=FakeObjects(pdbs),
                             nominator=self.nominator, rng=FixedRng(offset),
                             spawn=lambda coro, name: self.spawned.append(coro))
        registry = in_tree_registry()
        self.framework = build_framework(default_profile(registry), registry=registry, handle=self.handle)
        self.plugin: DefaultPreemption = self.framework.plugins_by_name["DefaultPreemption"]
        if args is not None:
            self.plugin = DefaultPreemption(args, self.handle)

    def cycle(self, pod: PodInfo) -> tuple[CycleState, NodeToStatus]:
        """PreFilter and Filter as the scheduling cycle runs them (every node fails)."""
        state = CycleState()
        _, status, _ = self.framework.run_pre_filter_plugins(state, pod, self.nodes)
        assert status is None, status
        statuses = NodeToStatus()
        for node in self.nodes:
            status = self.framework.run_filter_plugins_with_nominated_pods(state, pod, node)
            assert status is not None, f"{pod.key} fits {node.name}"
            statuses.statuses[node.name] = status
        return state, statuses

    def post_filter(self, pod: PodInfo) -> tuple[PostFilterResult | None, Status | None]:
        state, statuses = self.cycle(pod)
        return self.plugin.post_filter(state, pod, statuses)

    def select_victims(self, pod: PodInfo, node: NodeInfo) -> tuple[list[str], int, Status | None]:
        state, _ = self.cycle(pod)
        evaluator = self.plugin.evaluator
        pdbs = evaluator.pod_disruption_budgets()
        victims, violations, status = evaluator.select_victims_on_node(state.clone(), pod, node.clone(), pdbs)
        if not self.framework.has_active_pre_filter_extensions(state):
            # The batched dry run must answer exactly as the node-by-node one.
            [batched] = evaluator.select_victims_on_nodes(state.clone(), pod, [node], pdbs)
            assert (batched[0], batched[1]) == (victims, violations)
            assert batched[2] == status or (batched[2].code, batched[2].reasons) == (status.code, status.reasons)
        return [v.name for v in victims], violations, status

    async def side_effects(self) -> None:
        for coro in self.spawned:
            await coro
        self.spawned.clear()


# -- victim selection on one node -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("pods", "pdbs", "pod", "victims", "violations", "status"),
    [
        pytest.param(
            [running("p1", priority=1), running("p2", priority=2), running("p3", cpu="2", priority=3)],
            (), preemptor(), ["p2", "p1"], 0, None,
            id="lowest-priority-victims-highest-reprieved-first"),
        pytest.param(
            [running("same", cpu="2", priority=10), running("low", cpu="2", priority=1)],
            (), preemptor(), ["low"], 0, None,
            id="equal-priority-never-preempted"),
        pytest.param(
            [running("same", cpu="2", priority=10), running("higher", cpu="2", priority=20)],
            (), preemptor(), [], 0, Status.unresolvable(NO_VICTIMS),
            id="only-equal-or-higher-priority-no-victims"),
        pytest.param(
            [running("higher", cpu="3", priority=20), running("low", priority=1)],
            (), preemptor(), [], 0, Status.unschedulable("Insufficient cpu"),
            id="no-fit-even-without-every-lower-priority-pod"),
        pytest.param(
            [running("old", cpu="2", priority=1, start="2024-01-01T00:00:00Z"),
             running("new", cpu="2", priority=1, start="2024-01-01T01:00:00Z")],
            (), preemptor(), ["new"], 0, None,
            id="equal-priority-the-longer-running-pod-is-reprieved"),
        pytest.param(
            [running("old", cpu="2", priority=1, start="2024-01-01T00:00:00Z"),
             running("guarded", cpu="2", priority=1, start="2024-01-01T01:00:00Z", labels={"app": "db"})],
            (pdb("db", {"app": "db"}, 0),), preemptor(), ["old"], 0, None,
            id="pdb-violating-pod-reprieved-first"),
        pytest.param(
            [running("a", cpu="2", priority=1, labels={"app": "db"}),
             running("b", cpu="2", priority=1, labels={"app": "db"}, start=T1)],
            (pdb("db", {"app": "db"}, 1),), preemptor(cpu="4"), ["a", "b"], 1, None,
            id="pdb-allows-one-the-second-violates"),
        pytest.param(
            [running("a", cpu="2", priority=1, labels={"app": "db"}),
             running("b", cpu="2", priority=1, labels={"app": "db"}, start=T1)],
            (pdb("db", {"app": "db"}, 0, disrupted=("a",)),), preemptor(cpu="4"), ["a", "b"], 1, None,
            id="pods-already-disrupted-do-not-count"),
        pytest.param(
            [running("old", cpu="1500m", priority=1, start=T0), running("new", cpu="2", priority=1, start=T1)],
            (), preemptor(host_ports=[80]), ["new"], 0, None,
            id="preemptor-with-host-port-the-longer-running-pod-is-reprieved"),
    ],
)
def test_select_victims_on_node(pods, pdbs, pod, victims, violations, status):
    node = node_info(make_node("n1", cpu="4"), *pods)
    env = Env([node], pdbs=pdbs)
    got_victims, got_violations, got_status = env.select_victims(pod, node)
    assert (got_victims, got_violations) == (victims, violations)
    if status is None:
        assert got_status is None
    else:
        assert (got_status.code, got_status.reasons) == (status.code, status.reasons)
    assert len(node.pods) == len(pods), "the dry run must work on a clone"


def test_victims_account_for_pods_nominated_to_the_node():
    """A higher-priority pod nominated to the node keeps its room: more victims are needed."""
    node = node_info(make_node("n1", cpu="4"), running("l1", priority=1), running("l2", priority=1),
                     running("l3", cpu="2", priority=1))
    env = Env([node])
    assert env.select_victims(preemptor(), node) == (["l3"], 0, None)
    nominated = PodInfo(make_pod("nominated", requests={"cpu": "1"}, priority=50, uid="nominated"))
    env.nominator.add_nominated_pod(nominated, "n1")
    assert env.select_victims(preemptor(), node) == (["l2", "l3"], 0, None)


# -- PDB split ------------------------------------------------------------------------------------


def _pods(*specs: tuple[str, dict[str, str], str]) -> list[PodInfo]:
    return [PodInfo(make_pod(name, namespace, labels=labels, uid=name)) for name, labels, namespace in specs]


@pytest.mark.parametrize(
    ("pods", "pdbs", "violating"),
    [
        pytest.param(_pods(("a", {"app": "x"}, "default"), ("b", {"app": "x"}, "default")),
                     [pdb("x", {"app": "x"}, 1)], ["b"], id="budget-decremented-per-pod"),
        pytest.param(_pods(("a", {"app": "x"}, "other")), [pdb("x", {"app": "x"}, 0)], [],
                     id="other-namespace-not-matched"),
        pytest.param(_pods(("a", {}, "default")), [pdb("x", {"app": "x"}, 0)], [], id="no-labels-no-match"),
        pytest.param(_pods(("a", {"app": "x"}, "default")),
                     [{"kind": "PodDisruptionBudget", "metadata": {"name": "e", "namespace": "default"},
                       "spec": {"selector": {}}, "status": {"disruptionsAllowed": 0}}], [],
                     id="empty-selector-matches-nothing"),
        pytest.param(_pods(("a", {"app": "x"}, "default")),
                     [pdb("x", {"app": "x"}, 0, disrupted=("a",))], [], id="disrupted-pod-skipped"),
        pytest.param(_pods(("a", {"app": "x", "tier": "db"}, "default")),
                     [pdb("x", {"app": "x"}, 5), pdb("t", {"tier": "db"}, 0)], ["a"], id="any-pdb-violated"),
    ],
)
def test_filter_pods_with_pdb_violation(pods, pdbs, violating):
    budgets = [DisruptionBudget.from_obj(p) for p in pdbs]
    got_violating, got_non_violating = filter_pods_with_pdb_violation(pods, budgets)
    assert [p.name for p in got_violating] == violating
    assert [p.name for p in got_non_violating] == [p.name for p in pods if p.name not in violating]


# -- candidate ordering ---------------------------------------------------------------------------


def _victim(name: str, priority: int, start: str = T0) -> PodInfo:
    return PodInfo(running(name, priority=priority, start=start))


@pytest.mark.parametrize(
    ("candidates", "chosen"),
    [
        pytest.param([Candidate("n1", (_victim("a", 1),), 1), Candidate("n2", (_victim("b", 5),), 0)],
                     "n2", id="fewest-pdb-violations"),
        pytest.param([Candidate("n1", (_victim("a", 5),)), Candidate("n2", (_victim("b", 3), _victim("c", 3)))],
                     "n2", id="lowest-highest-victim-priority"),
        pytest.param([Candidate("n1", (_victim("a", 3), _victim("b", 2))),
                      Candidate("n2", (_victim("c", 3), _victim("d", 1)))],
                     "n2", id="smallest-priority-sum"),
        pytest.param([Candidate("n1", (_victim("a", -5), _victim("b", -5))), Candidate("n2", (_victim("c", -5),))],
                     "n2", id="negative-priorities-sum-offset"),
        pytest.param([Candidate("n1", (_victim("a", 3), _victim("b", 0))),
                      Candidate("n2", (_victim("c", 3),)), Candidate("n3", (_victim("d", 3),))],
                     "n2", id="fewest-victims-then-first"),
        pytest.param([Candidate("n1", (_victim("a", 3, "2024-01-01T00:00:00Z"),)),
                      Candidate("n2", (_victim("b", 3, "2024-01-02T00:00:00Z"),))],
                     "n2", id="latest-start-of-highest-priority-victims"),
        pytest.param([Candidate("n1", (_victim("a", 3, "2024-01-03T00:00:00Z"),
                                       _victim("b", 1, "2023-01-01T00:00:00Z"))),
                      Candidate("n2", (_victim("c", 3, "2024-01-02T00:00:00Z"),
                                       _victim("d", 1, "2024-06-01T00:00:00Z")))],
                     "n1", id="start-time-counts-only-the-highest-priority-victims"),
        pytest.param([Candidate("n1", (_victim("a", 3),)), Candidate("n2", (_victim("b", 3),))],
                     "n1", id="full-tie-first"),
        pytest.param([Candidate("n1", (_victim("a", 3, "2024-01-01T00:00:00Z"),)),
                      Candidate("n2", (_victim("b", 3, start=""),))],
                     "n2", id="not-started-counts-as-now"),
    ],
)
def test_pick_one_node_for_preemption(candidates, chosen):
    assert pick_one_node_for_preemption(candidates).name == chosen


def test_pick_one_node_of_none():
    assert pick_one_node_for_preemption([]) is None


@pytest.mark.parametrize(
    ("nodes", "percentage", "absolute", "expected"),
    [
        pytest.param(500, 10, 100, 100, id="defaults-500-absolute-wins"),
        pytest.param(5000, 10, 100, 500, id="defaults-5000-percentage-wins"),
        pytest.param(50, 10, 100, 50, id="capped-at-node-count"),
        pytest.param(1000, 0, 5, 5, id="absolute-only"),
        pytest.param(10, 100, 0, 10, id="percentage-only"),
        pytest.param(7, 50, 0, 3, id="integer-division"),
    ],
)
def test_calculate_num_candidates(nodes, percentage, absolute, expected):
    assert calculate_num_candidates(nodes, percentage=percentage, absolute=absolute) == expected


# -- PostFilter end to end over a few nodes --------------------------------------------------------


def assert_found(result: PostFilterResult | None, status: Status | None) -> None:
    """Preemption succeeded: v1.37 says where, and how many victims, in a Success status."""
    assert result is not None and status is not None, status
    assert (status.code, status.message) == (
        Code.SUCCESS, f"preemption: found a potential placement for pod on node {result.nominated_node_name}, "
                      f"preempting {len(result.victims)} victims")


def test_pod_with_higher_priority_can_be_made_schedulable():
    """Upstream's TestPostFilter "pod with higher priority can be made schedulable" (v1.37):
    the Success status carries the placement, which the FitError message then shows."""
    env = Env([node_info(make_node("node1", cpu="2"), running("p1", cpu="2", priority=1))])
    result, status = env.post_filter(preemptor(cpu="1"))
    assert result is not None and result.nominated_node_name == "node1"
    assert status == Status(Code.SUCCESS, ("preemption: found a potential placement for pod on node node1, "
                                           "preempting 1 victims",))


async def test_preempts_lowest_priority_victims_on_the_best_node():
    nodes = [
        node_info(make_node("n1", cpu="4"), running("n1-mid", cpu="2", priority=5),
                  running("n1-high", cpu="2", priority=8)),
        node_info(make_node("n2", cpu="4"), running("n2-low", cpu="2", priority=1),
                  running("n2-mid", cpu="2", priority=5)),
    ]
    env = Env(nodes)
    result, status = env.post_filter(preemptor())
    assert_found(result, status)
    assert result == PostFilterResult(nominated_node_name="n2", victims=("default/n2-low",))
    await env.side_effects()
    assert env.client.deleted == ["default/n2-low"]
    condition = env.client.delete_conditions["n2-low"]
    assert {k: condition[k] for k in ("type", "status", "reason", "message")} == {
        "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
        "message": "default-scheduler: preempting to accommodate a higher priority pod"}
    assert [(e.regarding, e.type, e.reason, e.action, e.message) for e in env.client.events] == [
        ("default/n2-low", "Normal", "Preempted", "Preempting", "Preempted by pod preemptor on node n2")]
    assert len(nodes[1].pods) == 2, "the snapshot is left to the watch"


async def test_pdb_protected_pods_spared_when_another_candidate_exists():
    nodes = [
        node_info(make_node("n1", cpu="4"), running("guarded", cpu="4", priority=1, labels={"app": "db"})),
        node_info(make_node("n2", cpu="4"), running("free", cpu="4", priority=3)),
    ]
    env = Env(nodes, pdbs=(pdb("db", {"app": "db"}, 0),))
    result, status = env.post_filter(preemptor())
    assert_found(result, status)
    assert result == PostFilterResult(nominated_node_name="n2", victims=("default/free",))


async def test_pdb_protected_pod_preempted_when_it_is_the_only_candidate():
    nodes = [node_info(make_node("n1", cpu="4"), running("guarded", cpu="4", priority=1, labels={"app": "db"}))]
    env = Env(nodes, pdbs=(pdb("db", {"app": "db"}, 0),))
    result, status = env.post_filter(preemptor())
    assert_found(result, status)
    assert result == PostFilterResult(nominated_node_name="n1", victims=("default/guarded",))


def test_preemption_policy_never_is_not_eligible():
    nodes = [node_info(make_node("n1", cpu="4"), running("low", cpu="4", priority=1))]
    env = Env(nodes)
    result, status = env.post_filter(preemptor(preemptionPolicy="Never"))
    assert result is None
    assert (status.code, status.reasons) == (Code.UNSCHEDULABLE,
                                              ("preemption: not eligible due to preemptionPolicy=Never.",))
    assert env.spawned == []


def test_no_candidates_message_counts_every_node():
    nodes = [
        node_info(make_node("busy", cpu="4"), running("higher", cpu="4", priority=20)),
        node_info(make_node("tainted", cpu="4", taints=[taint("dedicated", "gpu")])),
        node_info(make_node("small", cpu="1")),
    ]
    env = Env(nodes)
    result, status = env.post_filter(preemptor())
    assert result == PostFilterResult(nominated_node_name="")
    assert (status.code, status.reasons) == (Code.UNSCHEDULABLE, (
        f"preemption: 0/3 nodes are available: 1 {NO_VICTIMS}, 2 {NOT_HELPFUL}.",))


def _nominated_preemptor(node: str) -> PodInfo:
    raw = make_pod("preemptor", requests={"cpu": "2"}, priority=10, uid="preemptor")
    raw["status"]["nominatedNodeName"] = node
    return PodInfo(raw)


def _terminating_victim() -> dict[str, Any]:
    pod = running("leaving", cpu="4", priority=1)
    pod["metadata"]["deletionTimestamp"] = T0
    pod["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]
    return pod


def test_terminating_victim_on_the_nominated_node_waits():
    nodes = [node_info(make_node("n1", cpu="4"), _terminating_victim()),
             node_info(make_node("n2", cpu="4"), running("other", cpu="4", priority=1))]
    env = Env(nodes)
    result, status = env.post_filter(_nominated_preemptor("n1"))
    assert result is None
    assert status.reasons == ("preemption: not eligible due to a terminating pod on the nominated node.",)


def test_nominated_node_now_unresolvable_allows_preempting_elsewhere():
    nodes = [node_info(make_node("n1", cpu="4"), _terminating_victim()),
             node_info(make_node("n2", cpu="4"), running("other", cpu="4", priority=1))]
    env = Env(nodes)
    pod = _nominated_preemptor("n1")
    state, statuses = env.cycle(pod)
    statuses.statuses["n1"] = Status.unresolvable("node(s) were unschedulable")
    result, status = env.plugin.post_filter(state, pod, statuses)
    assert_found(result, status)
    assert result == PostFilterResult(nominated_node_name="n2", victims=("default/other",))


async def test_lower_priority_nominations_on_the_chosen_node_are_cleared():
    nodes = [node_info(make_node("n1", cpu="4"), running("low", cpu="4", priority=1))]
    env = Env(nodes)
    lower_raw = make_pod("lower", requests={"cpu": "1"}, priority=5, uid="lower")
    lower_raw["status"]["nominatedNodeName"] = "n1"
    higher_raw = make_pod("higher", requests={"cpu": "1"}, priority=50, uid="higher")
    for raw in (lower_raw, higher_raw):
        env.client.add_pod(raw)
        env.nominator.add_nominated_pod(PodInfo(raw), "n1")
    result, status = env.post_filter(preemptor(cpu="1"))
    assert_found(result, status)
    assert result.nominated_node_name == "n1"
    assert [p.name for p in env.nominator.nominated_pods_for_node("n1")] == ["higher"]
    await env.side_effects()
    assert ("lower", "") in env.client.patches
    assert "nominatedNodeName" not in env.client.pods["default/lower"]["status"]


async def test_waiting_victim_is_rejected_not_deleted():
    victim = running("waiting", cpu="4", priority=1)
    nodes = [node_info(make_node("n1", cpu="4"), victim)]
    env = Env(nodes)
    waiting = WaitingPod(PodInfo(victim), "n1", {"Gang": 60.0})
    env.handle.waiting_pods.add(waiting)
    result, status = env.post_filter(preemptor())
    assert_found(result, status)
    assert result.victims == ("default/waiting",)
    await env.side_effects()
    assert env.client.deleted == []
    assert await waiting.wait() == (False, "DefaultPreemption", "preempted")


@pytest.mark.parametrize(
    ("args", "offset", "chosen"),
    [
        pytest.param(DefaultPreemptionArgs(0, 1), 1, "n2", id="one-candidate-from-the-random-offset"),
        pytest.param(DefaultPreemptionArgs(0, 1), 2, "n3", id="offset-wraps-to-the-better-node"),
        pytest.param(None, 1, "n3", id="defaults-check-every-node"),
    ],
)
def test_dry_run_stops_after_enough_candidates(args, offset, chosen):
    nodes = [node_info(make_node(f"n{i}", cpu="4"), running(f"v{i}", cpu="4", priority=prio))
             for i, prio in ((1, 5), (2, 5), (3, 1))]
    env = Env(nodes, offset=offset, args=args)
    result, status = env.post_filter(preemptor())
    assert_found(result, status)
    assert result.nominated_node_name == chosen


# -- args -----------------------------------------------------------------------------------------


def test_args_defaults_and_factory():
    assert PLUGIN.name == "DefaultPreemption"
    assert PLUGIN.decode_args(None) == DefaultPreemptionArgs(10, 100)
    assert PLUGIN.decode_args({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 5}) == \
        DefaultPreemptionArgs(0, 5)


@pytest.mark.parametrize(
    ("raw", "problems"),
    [
        pytest.param({"minCandidateNodesPercentage": 101}, [
            ("minCandidateNodesPercentage", "Invalid value: 101: not in valid range [0, 100]")], id="percentage-high"),
        pytest.param({"minCandidateNodesPercentage": -1}, [
            ("minCandidateNodesPercentage", "Invalid value: -1: not in valid range [0, 100]")], id="percentage-neg"),
        pytest.param({"minCandidateNodesAbsolute": -1}, [
            ("minCandidateNodesAbsolute", "Invalid value: -1: not in valid range [0, inf)")], id="absolute-neg"),
        pytest.param({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0}, [
            ("minCandidateNodesPercentage",
             "Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute"),
            ("minCandidateNodesAbsolute",
             "Invalid value: 0: cannot be zero at the same time as minCandidateNodesPercentage")], id="both-zero"),
        pytest.param({"minCandidateNodesAbsolute": "ten"}, [
            ("minCandidateNodesAbsolute", "must be an integer, got 'ten'")], id="not-an-integer"),
        pytest.param({"maxCandidates": 3}, [("maxCandidates", "unknown field")], id="unknown-field"),
    ],
)
def test_args_validation(raw, problems):
    with pytest.raises(ArgsError) as err:
        PLUGIN.decode_args(raw)
    assert err.value.problems == problems


def _mixed_cluster(seed: int) -> list[NodeInfo]:
    """Twenty 4-CPU nodes with two or three running pods of mixed sizes, priorities and ages (a 3-CPU
    pod fits on none of them as they are)."""
    rng = random.Random(seed)
    nodes = []
    for i in range(20):
        pods = [running(f"v{i}-{j}", cpu=rng.choice(["1", "1500m"]), priority=rng.choice([0, 1, 5, 20]),
                        start=rng.choice([T0, T1])) for j in range(rng.randint(2, 3))]
        nodes.append(node_info(make_node(f"n{i:02}", cpu="4"), *pods))
    return nodes


def _dry_run(env: Env, pod: PodInfo, offset: int, num_candidates: int, *, defer: bool):
    state, statuses = env.cycle(pod)
    evaluator = env.plugin.evaluator
    potential = evaluator.nodes_where_preemption_might_help(env.nodes, statuses)
    result = evaluator.dry_run_preemption(state, pod, potential, evaluator.pod_disruption_budgets(), offset=offset,
                                          num_candidates=num_candidates, defer=defer)
    return ([(c.name, [v.name for v in c.victims], c.num_pdb_violations) for c in result.candidates],
            {name: (s.code, s.reasons) for name, s in result.statuses.statuses.items()})


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("offset", "num_candidates"), [(0, 1), (7, 3), (13, 100)])
def test_dry_run_choosing_victims_after_the_search_finds_the_same(seed: int, offset: int, num_candidates: int):
    """Without PDBs the reprieves run once, for the candidates kept: the same candidates, victims
    and statuses as reprieving every batch's nodes as they are judged."""
    nodes = _mixed_cluster(seed)
    env = Env(nodes)
    nominated = PodInfo(make_pod("big", requests={"cpu": "1"}, priority=30, uid="big"))
    env.nominator.add_nominated_pod(nominated, nodes[seed + 1].name)  # judged node by node
    pod = preemptor(cpu="3", priority=10)
    assert _dry_run(env, pod, offset, num_candidates, defer=True) == _dry_run(env, pod, offset, num_candidates,
                                                                               defer=False)


def test_dry_run_searches_again_if_a_kept_candidate_needs_no_victim(monkeypatch: pytest.MonkeyPatch):
    """A candidate whose reprieves would give every victim back (Filter rejected the node, so this
    cannot happen with the in-tree plugins): the search runs again, reprieving as it goes."""
    env = Env(_mixed_cluster(1))
    pod = preemptor(cpu="3", priority=10)
    expected = _dry_run(env, pod, 3, 5, defer=False)
    from kopfsched.framework.preemption import batched

    real = batched.reprieve
    calls: list[int] = []

    def first_gives_everything_back(ev, state, pod, nodes, queues):
        calls.append(len(nodes))
        answers = real(ev, state, pod, nodes, queues)
        return [([], 0, None), *answers[1:]] if len(calls) == 1 else answers

    monkeypatch.setattr(batched, "reprieve", first_gives_everything_back)
    assert _dry_run(env, pod, 3, 5, defer=True) == expected
    assert calls[0] == 5 and len(calls) > 1


@pytest.mark.parametrize("pod_dependent_only", [False, True])
def test_what_if_passes_are_the_rows_whose_status_is_none(pod_dependent_only: bool):
    """The reprieves ask only which rows pass: the same rows run_filter_plugins_what_if answers None for."""
    import numpy as np

    from kopfsched.framework.node_table import NodeTable, WhatIfTable

    env = Env(_mixed_cluster(3))
    seen: set[bool] = set()
    for cpu, priority in (("3", 10), ("2", 2), ("500m", 30)):
        pod = preemptor(cpu=cpu, priority=priority)
        state = CycleState()
        env.framework.run_pre_filter_plugins(state, pod, env.nodes)
        table = WhatIfTable(NodeTable(env.nodes), np.arange(len(env.nodes), dtype=np.int64), removed_below=priority)
        answers = env.framework.run_filter_plugins_what_if(state, pod, table, pod_dependent_only=pod_dependent_only)
        passes = env.framework.run_filter_plugins_what_if_passes(state, pod, table,
                                                                 pod_dependent_only=pod_dependent_only)
        assert passes.tolist() == [answer is None for answer in answers]
        seen.update(passes.tolist())
    assert seen == {True, False}

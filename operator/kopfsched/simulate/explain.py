"""`kopfsched explain`: why one pod lands where it does, or nowhere, node by node.

Two modes, named in every output:

- "simulate" (the default): the input is replayed exactly as `kopfsched simulate` runs it
  (same loading, queue order, seed and cycles), so the pods queued ahead of this one are
  placed first. When the pod is popped for its first attempt, it is evaluated over the
  cluster as that attempt finds it; then the run goes on, and the pod's result, node,
  nomination, victims and message are simulate's own entry for it. The two cannot disagree:
  they are one run. (A pod that is never attempted — gated, or of no profile here — is
  evaluated over the cluster as the run leaves it.)
- "as-given" (`--as-given`): the pod alone against the input as it stands, nothing else
  placed first.

The evaluation goes through the product's own scheduling cycle (SchedulingAlgorithm.schedule_pod
in its exhaustive mode: every node filtered, every feasible node scored, no sampling) with
the profile of its schedulerName. When nothing fits, preemption's dry run is repeated over
*every* node where removing pods might help, so all candidates and their victims can be
shown, not only the first ones the scheduler would sample; the chosen one is the node the
scheduler's PostFilter nominated. The evaluation leaves the run untouched (the random
generator is restored after it), and the picture is drawn before any victim is removed.

Nothing leaves the process: the scheduler talks to the in-memory client, whatever the
input came from.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

from kopfsched.config.types import DEFAULT_SCHEDULER_NAME, ProfileConfig
from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.diagnosis import FitError
from kopfsched.framework.preemption import Evaluator, pick_one_node_for_preemption
from kopfsched.framework.registry import Registry
from kopfsched.framework.runtime import Framework
from kopfsched.framework.status import Status
from kopfsched.framework.types import PodInfo, pod_key
from kopfsched.plugins.defaultpreemption.plugin import DefaultPreemption
from kopfsched.plugins.registry import full_registry
from kopfsched.scheduler.schedule_one import ScheduleResult, SchedulingError
from kopfsched.simulate.html import cluster_view
from kopfsched.simulate.loader import ClusterInput, apply_priority_classes, default_requests, generate_resource_claims
from kopfsched.simulate.output import filter_explain, node_results, pod_results
from kopfsched.simulate.runner import MAX_ATTEMPTS_PER_POD, Simulation, drain, load_scheduler
from kopfsched.simulate.workloads import expand_workloads


@dataclass
class Explanation:
    entry: dict[str, Any]
    """What `-o json` prints."""
    nodes: list[dict[str, Any]] = field(default_factory=list)
    """Every node's requested and allocatable resources without the pod (as simulate's "nodes")."""
    view: dict[str, Any] = field(default_factory=dict)
    """What the HTML page draws (simulate.html.cluster_view)."""


class ExplainError(Exception):
    """The pod cannot be explained (not in the input); str() is the one-line message."""


def parse_pod_ref(ref: str) -> str:
    """NAMESPACE/NAME (or NAME, in namespace default) -> the pod key."""
    namespace, _, name = ref.rpartition("/")
    if not name or "/" in namespace:
        raise ExplainError(f"{ref!r}: expected NAMESPACE/NAME")
    return f"{namespace or 'default'}/{name}"


def _status_json(status: Status) -> dict[str, Any]:
    return {"plugin": status.plugin, "code": status.code.upstream_name, "reasons": list(status.reasons)}


MODE_SIMULATE = "simulate"
MODE_AS_GIVEN = "as-given"
MODE_TEXT = {
    MODE_SIMULATE: "in simulate's order: the pods queued ahead of this one are placed first, as simulate "
                   "places them; --as-given for the input as it stands",
    MODE_AS_GIVEN: "as given: this pod alone against the input as it stands, nothing else placed first",
}


async def explain_pod(inputs: ClusterInput, ref: str, *, registry: Registry | None = None,
                      profile: ProfileConfig | None = None, seed: int | None = 0,
                      as_given: bool = False) -> Explanation:
    """The pod `ref`'s `simulate --explain` entry, plus "preemption" and the
    details only explain gives (weights, ranking, evaluated and feasible counts, the node
    the pod is bound to, the mode). `profile`, when given, is used for the pod whatever its
    schedulerName (in the default mode, for every pod of that schedulerName)."""
    key = parse_pod_ref(ref)
    expand_workloads(inputs)  # the pod may be one a controller would make
    apply_priority_classes(inputs)  # before the pod is taken out: it needs its priority too
    default_requests(inputs)  # and the requests the API server would have given it
    if not as_given:
        # And the claims its templates would give it. As given, a claim the resourceclaim
        # controller has not made yet (no status.resourceClaimStatuses entry) is not there, and
        # the pod waits for it outside the queue, as kube-scheduler keeps it.
        generate_resource_claims(inputs)
    target = next((p for p in inputs.pods if pod_key(p.obj) == key), None)
    if target is None:
        raise ExplainError(f'pod "{key}" not found in the input')
    pod_obj = copy.deepcopy(target.obj)
    spec = pod_obj["spec"]
    bound_node = spec.pop("nodeName", None) or None
    if bound_node:
        # Running pods are explained as if they were created now: their old nomination and
        # scheduling condition say nothing about the cluster as it is.
        status = pod_obj.get("status") or {}
        status.pop("nominatedNodeName", None)
        (pod_obj.get("metadata") or {}).pop("creationTimestamp", None)  # queued after every pending pod
    scheduler_name = spec.get("schedulerName") or DEFAULT_SCHEDULER_NAME
    overrides = [dataclasses.replace(profile, scheduler_name=scheduler_name)] if profile is not None else []
    mode = MODE_AS_GIVEN if as_given else MODE_SIMULATE
    entry: dict[str, Any] = {
        "namespace": key.split("/", 1)[0], "name": key.split("/", 1)[1], "schedulerName": scheduler_name,
        "result": "Unschedulable", "node": None, "nominatedNode": None, "victims": [], "message": "",
        "filter": {}, "scores": {},
        "mode": mode, "modeText": MODE_TEXT[mode],
        "profile": profile.source if profile is not None else scheduler_name,
        "boundNode": bound_node,
        "note": (f"the pod is bound to {bound_node}; it is explained as if it were pending now, "
                 "without its own resource use on that node") if bound_node else "",
        "evaluatedNodes": 0, "feasibleNodes": 0, "weights": {}, "ranking": [],
        "preemption": None,
    }
    explanation = Explanation(entry)
    if as_given:
        inputs.pods = [p for p in inputs.pods if p is not target]
    else:
        # The pod joins the run as simulate would queue it; a bound one, unbound, comes last.
        target.obj = pod_obj
        if bound_node:
            inputs.pods = [*(p for p in inputs.pods if p is not target), target]
    sim, clock, pending = load_scheduler(inputs, registry=registry or full_registry(), seed=seed,
                                         explain=not as_given, overrides=overrides)
    scheduler = sim.scheduler
    pod = PodInfo(pod_obj)
    fwk = scheduler.profiles.framework_for(pod)
    if fwk is None:
        # kube-scheduler leaves such pods to the scheduler of that name, as simulate reports them.
        entry["result"] = "NotHandled"
        entry["message"] = f'no profile named "{scheduler_name}"'
        return explanation
    entry["weights"] = {p.name: w for p, w in fwk.score_plugins}
    if as_given:
        await _explain_as_given(explanation, sim, fwk, pod)
        return explanation

    evaluated = False

    async def first_attempt(qpi: Any) -> None:
        nonlocal evaluated
        if qpi.key != key or evaluated:
            return
        evaluated = True
        state = scheduler.rng.getstate()
        try:
            await _evaluate(explanation, sim, fwk, qpi.pod_info)
        finally:
            scheduler.rng.setstate(state)  # the run goes on as simulate's would

    began = time.perf_counter()
    await drain(scheduler, clock, budget=MAX_ATTEMPTS_PER_POD * max(pending, 1), order=sim.order,
                before_attempt=first_attempt)
    sim.seconds = time.perf_counter() - began
    if not evaluated:  # never attempted: gated, or still waiting
        await _evaluate(explanation, sim, fwk, pod)
    [simulated] = [p for p in pod_results(sim, explain=True) if (p["namespace"], p["name"]) == tuple(key.split("/", 1))]
    for field_name in ("result", "node", "nominatedNode", "victims", "message"):
        entry[field_name] = simulated[field_name]
    if simulated["result"] == "Gated":
        entry["note"] = (entry["note"] + "; " if entry["note"] else "") + (
            "the pod is gated and would not be attempted; the nodes are evaluated anyway")
    preemption = entry["preemption"]
    if preemption is not None and entry["nominatedNode"]:
        preemption["chosen"] = entry["nominatedNode"]  # the scheduler's own pick, whatever the dry run over all
    return explanation


async def _evaluate(explanation: Explanation, sim: Simulation, fwk: Framework, pod: PodInfo) -> None:
    """Every node's verdict and score for `pod` over the cluster as it is now, and preemption's
    dry run; no side effect on the run (no PostFilter, nothing assumed)."""
    entry = explanation.entry
    scheduler = sim.scheduler
    state = CycleState()
    scheduler.cache.update_snapshot(scheduler.snapshot)
    node_names = [n.name for n in scheduler.snapshot.node_infos()]
    explanation.nodes = node_results(sim)
    explanation.view = cluster_view(sim, [])
    try:
        result = await scheduler.algorithm.schedule_pod(fwk, state, pod, exhaustive=True)
    except FitError as fit:
        entry["filter"] = filter_explain(fit.diagnosis, node_names)
        entry["evaluatedNodes"] = fit.num_all_nodes
        entry["preemption"] = _preemption_analysis(fwk, state, pod, fit, sim)
        entry["message"] = str(fit)
    except SchedulingError as err:
        entry["result"] = "Error"
        entry["message"] = err.status.message
    else:
        _fill_scores(entry, result, fwk, node_names)
        entry["result"], entry["node"] = "Scheduled", result.suggested_host


async def _explain_as_given(explanation: Explanation, sim: Simulation, fwk: Framework, pod: PodInfo) -> None:
    """The pod alone against the input as it stands; PostFilter runs as in a real cycle (for
    upstream's full message and the node it would nominate), after the picture is taken."""
    entry = explanation.entry
    scheduler = sim.scheduler
    gate = fwk.run_pre_enqueue_plugins(pod)
    if gate is not None:
        entry["result"] = "Gated"
        entry["note"] = (entry["note"] + "; " if entry["note"] else "") + (
            "the pod is gated and would not be attempted; the nodes are evaluated anyway")
    state = CycleState()
    # The snapshot as the attempt will see it: node names listed from a stale one would leave
    # a PreFilter rejection's nodes out of "filter".
    scheduler.cache.update_snapshot(scheduler.snapshot)
    node_names = [n.name for n in scheduler.snapshot.node_infos()]
    explanation.nodes = node_results(sim)
    explanation.view = cluster_view(sim, [])  # before PostFilter removes any victim
    try:
        result = await scheduler.algorithm.schedule_pod(fwk, state, pod, exhaustive=True)
    except FitError as fit:
        entry["filter"] = filter_explain(fit.diagnosis, node_names)
        entry["evaluatedNodes"] = fit.num_all_nodes
        entry["preemption"] = _preemption_analysis(fwk, state, pod, fit, sim)
        post_result, status = fwk.run_post_filter_plugins(state, pod, fit.diagnosis.node_to_status) \
            if fwk.has_post_filter_plugins() else (None, None)
        if status is not None and status.message:
            fit.diagnosis.post_filter_msg = status.message
        if post_result is not None and post_result.nominated_node_name:
            entry["nominatedNode"] = post_result.nominated_node_name
            entry["victims"] = list(post_result.victims)
            entry["preemption"]["chosen"] = post_result.nominated_node_name
        await scheduler.wait_for_tasks()  # preemption's side effects, on the in-memory client only
        if entry["result"] != "Gated":
            entry["message"] = str(fit)
    except SchedulingError as err:
        if entry["result"] != "Gated":
            entry["result"] = "Error"
        entry["message"] = err.status.message
    else:
        _fill_scores(entry, result, fwk, node_names)
        if entry["result"] != "Gated":
            entry["result"], entry["node"] = "Scheduled", result.suggested_host
            # As a scheduling cycle (upstream's evaluateNominatedNode): a pod whose earlier
            # nomination passes every Filter goes there, unscored, whatever the totals.
            nominated = (pod.pod.get("status") or {}).get("nominatedNodeName") or ""
            if nominated in node_names and nominated not in entry["filter"]:
                entry["node"], entry["nominatedNodeFits"] = nominated, True
                entry["note"] = (entry["note"] + "; " if entry["note"] else "") + (
                    f"its nominated node {nominated} fits, so it goes there unscored; the nodes are scored anyway")
    if gate is not None:
        entry["message"] = gate.message


def _fill_scores(entry: dict[str, Any], result: ScheduleResult, fwk: Framework, node_names: list[str]) -> None:
    entry["filter"] = filter_explain(result.diagnosis, node_names)
    entry["evaluatedNodes"] = result.evaluated_nodes
    entry["feasibleNodes"] = result.feasible_nodes
    scores = result.scores or {}
    entry["scores"] = dict(sorted(scores.items()))
    totals = sorted(((s["total"], name) for name, s in scores.items()), key=lambda t: (-t[0], t[1]))
    ranking: list[dict[str, Any]] = []
    for position, (total, name) in enumerate(totals):
        # Equal totals share a rank: the scheduler picks among them at random.
        rank = position + 1 if position == 0 or total != totals[position - 1][0] else ranking[-1]["rank"]
        ranking.append({"node": name, "total": total, "rank": rank})
    entry["ranking"] = ranking


def _preemption_analysis(fwk: Framework, state: CycleState, pod: PodInfo, fit: FitError,
                         sim: Simulation) -> dict[str, Any]:
    """Every node where preemption could make room, with its victims; or why it cannot help."""
    out: dict[str, Any] = {"eligible": False, "reason": "", "candidates": [], "chosen": None, "nodes": {}}
    evaluators = [p.evaluator for p in fwk.post_filter_plugins if isinstance(p, DefaultPreemption)]
    if not evaluators:
        names = ", ".join(p.name for p in fwk.post_filter_plugins)
        out["reason"] = (f"the profile's PostFilter plugins ({names}) are not DefaultPreemption"
                         if names else "the profile has no PostFilter plugin: preemption is off")
        return out
    evaluator: Evaluator = evaluators[0]
    statuses = fit.diagnosis.node_to_status
    nominated = (pod.pod.get("status") or {}).get("nominatedNodeName") or ""
    eligible, why = evaluator.pod_eligible_to_preempt_others(pod, statuses.get(nominated) if nominated else None)
    if not eligible:
        out["reason"] = why
        return out
    out["eligible"] = True
    all_nodes = sim.scheduler.snapshot.node_infos()
    potential = evaluator.nodes_where_preemption_might_help(all_nodes, statuses)
    unresolvable = len(all_nodes) - len(potential)
    if not potential:
        out["reason"] = (f"all {unresolvable} nodes rejected the pod as UnschedulableAndUnresolvable, "
                         "which removing pods cannot change")
        return out
    dry = evaluator.dry_run_preemption(state.clone(), pod, potential, evaluator.pod_disruption_budgets(),
                                       offset=0, num_candidates=len(potential))
    out["nodes"] = {name: _status_json(status) for name, status in sorted(dry.statuses.statuses.items())}
    candidates = sorted(dry.candidates, key=lambda c: c.name)
    out["candidates"] = [{"node": c.name, "victims": [v.key for v in c.victims],
                          "pdbViolations": c.num_pdb_violations} for c in candidates]
    best = pick_one_node_for_preemption(dry.candidates)
    out["chosen"] = best.name if best is not None else None
    if not candidates:
        out["reason"] = (f"on none of the {len(potential)} nodes where removing pods might help does the pod fit "
                         f"once every lower-priority pod is gone"
                         + (f"; {unresolvable} other node(s) are UnschedulableAndUnresolvable" if unresolvable
                            else ""))
    return out

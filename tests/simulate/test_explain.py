"""`kopfsched explain`: every node evaluated, exact reasons and scores, preemption candidates."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from kopfsched.cli import main
from kopfsched.simulate.explain import ExplainError, Explanation, explain_pod
from kopfsched.simulate.explain_table import to_table
from kopfsched.simulate.loader import load_objects
from kopfsched.testing import make_node, make_pod, taint

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(objects: list[dict[str, Any]], ref: str, **kwargs: Any) -> Explanation:
    inputs = load_objects(objects, "test")
    assert not inputs.problems
    return asyncio.run(explain_pod(inputs, ref, **kwargs))


def test_every_node_is_filtered_and_scored_without_sampling() -> None:
    # 150 nodes: a scheduling cycle would stop after 100 feasible ones (adaptive percentage).
    nodes = [make_node(f"n{i:03}", cpu="4") for i in range(150)]
    nodes += [make_node(f"small{i}", cpu="500m") for i in range(7)]
    nodes += [make_node("tainted", taints=[taint("dedicated", "gpu")])]
    entry = run([*nodes, make_pod("web", requests={"cpu": "1"})], "default/web").entry
    assert entry["evaluatedNodes"] == 158
    assert entry["feasibleNodes"] == 150
    assert len(entry["scores"]) == 150
    # More than the node's allocatable: removing pods cannot help (upstream's unresolvable case).
    assert entry["filter"]["small3"] == {"plugin": "NodeResourcesFit", "code": "UnschedulableAndUnresolvable",
                                         "reasons": ["Insufficient cpu"]}
    assert entry["filter"]["tainted"] == {"plugin": "TaintToleration", "code": "UnschedulableAndUnresolvable",
                                          "reasons": ["node(s) had untolerated taint(s)"]}
    assert sorted(entry["filter"]) == [*(f"small{i}" for i in range(7)), "tainted"]
    table = to_table(entry)
    assert "  7 nodes: Insufficient cpu (NodeResourcesFit)\n" in table
    assert "  1 node: node(s) had untolerated taint(s) (TaintToleration)\n" in table
    assert all(len(line) <= 80 for line in table.splitlines())


def test_scores_weights_total_and_rank() -> None:
    objects = [make_node("big", cpu="8", memory="32Gi"), make_node("small", cpu="4", memory="32Gi"),
               make_pod("web", requests={"cpu": "1", "memory": "8Gi"})]
    entry = run(objects, "default/web").entry
    # LeastAllocated: ((8-1)*100/8 + (32-8)*100/32) / 2 = (87 + 75) / 2 on big, (75 + 75) / 2 on small.
    assert entry["scores"]["big"]["NodeResourcesFit"] == 81
    assert entry["scores"]["small"]["NodeResourcesFit"] == 75
    assert entry["weights"] == {"TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1,
                                "PodTopologySpread": 2, "InterPodAffinity": 2,
                                "NodeResourcesBalancedAllocation": 1, "ImageLocality": 1, "VolumeBinding": 1,
                                "DynamicResources": 2}
    for scores in entry["scores"].values():
        assert scores["total"] == sum(entry["weights"][p] * s for p, s in scores.items() if p != "total")
    # v1.37's BalancedAllocation: big goes from balance 100 to 93 (50 + (50 + 93 - 100) // 2 = 71),
    # small stays at 100 (75): 81 + 71 beats 75 + 75.
    assert entry["scores"]["big"]["NodeResourcesBalancedAllocation"] == 71
    assert entry["scores"]["small"]["NodeResourcesBalancedAllocation"] == 75
    assert [r["node"] for r in entry["ranking"]] == ["big", "small"]
    assert entry["ranking"][0]["rank"] == 1 and entry["ranking"][1]["rank"] == 2
    assert entry["result"] == "Scheduled" and entry["node"] == "big"


def test_single_feasible_node_is_still_scored() -> None:
    objects = [make_node("a", cpu="2"), make_node("b", cpu="500m"), make_pod("web", requests={"cpu": "1"})]
    entry = run(objects, "default/web").entry
    assert list(entry["scores"]) == ["a"] and entry["node"] == "a"
    assert entry["ranking"] == [{"node": "a", "total": entry["scores"]["a"]["total"], "rank": 1}]


def test_bound_pod_is_explained_as_pending_without_its_own_usage() -> None:
    objects = [make_node("a", cpu="4"), make_pod("big", requests={"cpu": "3"}, node_name="a")]
    entry = run(objects, "default/big").entry
    assert entry["boundNode"] == "a"
    assert entry["note"].startswith("the pod is bound to a; it is explained as if it were pending now")
    assert entry["result"] == "Scheduled" and entry["node"] == "a"
    assert "Note: the pod is bound to a" in to_table(entry)


def test_preemption_candidates_with_victims_and_the_chosen_node() -> None:
    entry = run_file(EXAMPLES / "affinity-and-preemption.yaml", "default/payments-0")
    # As simulate: bound after preempting, with its first attempt's FailedScheduling message.
    assert (entry["result"], entry["node"]) == ("Scheduled", "node-b2")
    assert entry["message"] == ("0/6 nodes are available: 6 Insufficient cpu. preemption: found a potential "
                                "placement for pod on node node-b2, preempting 1 victims")
    preemption = entry["preemption"]
    assert preemption["eligible"] is True
    assert preemption["candidates"] == [
        {"node": f"node-{n}", "victims": [f"default/batch-{n}"], "pdbViolations": 0}
        for n in ("a1", "a2", "b1", "b2", "c1", "c2")]
    # batch-b2 has the lowest priority: upstream's pick and the scheduler's nomination agree.
    assert preemption["chosen"] == "node-b2"
    assert entry["nominatedNode"] == "node-b2" and entry["victims"] == ["default/batch-b2"]


def run_file(path: Path, ref: str, **kwargs: Any) -> dict[str, Any]:
    return explain_file(path, ref, **kwargs).entry


def explain_file(path: Path, ref: str, **kwargs: Any) -> Explanation:
    from kopfsched.simulate.loader import load_files

    return asyncio.run(explain_pod(load_files([str(path)]), ref, **kwargs))


SAME = ("result", "node", "nominatedNode", "victims", "message")


@pytest.mark.parametrize("example", ["cluster.yaml", "affinity-and-preemption.yaml", "gang.yaml", "dra.yaml"])
def test_explain_says_what_simulate_does_for_every_pod(example: str) -> None:
    """One run: explain replays simulate up to the pod's first attempt, and its answer is
    simulate's entry for the pod (inference-0's "1 Insufficient cpu", a preemptor's result)."""
    from kopfsched.simulate.loader import load_files
    from kopfsched.simulate.output import to_json
    from kopfsched.simulate.runner import simulate

    report = to_json(asyncio.run(simulate(load_files([str(EXAMPLES / example)]), seed=0)), explain=False)
    for pod in report["pods"]:
        entry = run_file(EXAMPLES / example, f"{pod['namespace']}/{pod['name']}")
        assert {k: entry[k] for k in SAME} == {k: pod[k] for k in SAME}, pod["name"]
        assert entry["mode"] == "simulate"
        if entry["nominatedNode"]:
            assert entry["preemption"]["chosen"] == entry["nominatedNode"]


def test_the_quick_start_pod_has_simulates_message_and_as_given_does_not() -> None:
    replayed = run_file(EXAMPLES / "cluster.yaml", "ml/inference-0")
    assert replayed["message"].startswith("0/24 nodes are available: 1 Insufficient cpu, ")
    as_given = run_file(EXAMPLES / "cluster.yaml", "ml/inference-0", as_given=True)
    assert as_given["mode"] == "as-given"
    assert as_given["message"].startswith("0/24 nodes are available: 1 node(s) were unschedulable, ")
    assert to_table(as_given).splitlines()[1] == (
        "Mode: as given: this pod alone against the input as it stands, nothing else")


def test_as_given_preemptor_is_drawn_with_its_victim_and_chosen_is_the_nomination() -> None:
    explanation = explain_file(EXAMPLES / "affinity-and-preemption.yaml", "default/payments-0", as_given=True)
    entry = explanation.entry
    assert entry["result"] == "Unschedulable" and entry["preemption"]["chosen"] == entry["nominatedNode"]
    [node] = [n for n in explanation.view["nodes"] if n[0] == entry["nominatedNode"]]
    assert entry["victims"][0] in node[8]  # the pods on it: the page shows the cluster the verdict was made on


def _preemption_cluster(**preemptor: Any) -> list[dict[str, Any]]:
    return [make_node("a", cpu="2"), make_node("b", cpu="2"),
            make_pod("low-a", requests={"cpu": "2"}, priority=1, node_name="a", labels={"app": "guarded"}),
            make_pod("low-b", requests={"cpu": "2"}, priority=1, node_name="b"),
            make_pod("vip", requests={"cpu": "2"}, priority=100, **preemptor)]


def test_preemption_counts_pdb_violations_and_prefers_the_node_without() -> None:
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "guard", "namespace":
           "default"}, "spec": {"selector": {"matchLabels": {"app": "guarded"}}}, "status": {"disruptionsAllowed": 0}}
    entry = run([*_preemption_cluster(), pdb], "default/vip").entry
    assert entry["preemption"]["candidates"] == [
        {"node": "a", "victims": ["default/low-a"], "pdbViolations": 1},
        {"node": "b", "victims": ["default/low-b"], "pdbViolations": 0}]
    assert entry["preemption"]["chosen"] == "b"
    assert "a: evict default/low-a (1 PDB violation(s))" in to_table(entry)


def test_preemption_never_says_why() -> None:
    entry = run(_preemption_cluster(preemptionPolicy="Never"), "default/vip").entry
    assert entry["preemption"] == {"eligible": False, "reason": "not eligible due to preemptionPolicy=Never.",
                                   "candidates": [], "chosen": None, "nodes": {}}
    assert entry["message"] == ("0/2 nodes are available: 2 Insufficient cpu. "
                                "preemption: not eligible due to preemptionPolicy=Never.")
    assert "Preemption cannot help: not eligible due to preemptionPolicy=Never." in to_table(entry)


def test_unresolvable_everywhere_means_preemption_cannot_help() -> None:
    objects = [make_node("a", taints=[taint("x", "y")]), make_pod("web", requests={"cpu": "1"})]
    entry = run(objects, "default/web").entry
    assert entry["preemption"]["reason"] == ("all 1 nodes rejected the pod as UnschedulableAndUnresolvable, "
                                             "which removing pods cannot change")


@pytest.mark.parametrize("as_given", [False, True], ids=["simulate", "as-given"])
def test_a_prefilter_rejection_is_every_nodes_verdict(as_given: bool) -> None:
    """The PreFilter's status stands for every node, in both modes (as-given listed none)."""
    pod = make_pod("web", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "missing"}}])
    entry = run([make_node("a"), make_node("b"), pod], "default/web", as_given=as_given).entry
    verdict = {"plugin": "VolumeRestrictions", "code": "UnschedulableAndUnresolvable",
               "reasons": ['persistentvolumeclaim "missing" not found']}
    assert entry["filter"] == {"a": verdict, "b": verdict}


def test_profile_override_is_used_whatever_the_schedulername() -> None:
    from kopfsched.cli import _override_profiles
    from kopfsched.plugins.registry import full_registry

    problems: list[str] = []
    registry = full_registry()
    [profile] = _override_profiles([str(EXAMPLES / "profiles" / "bin-packing.yaml")], registry, problems)
    assert not problems
    objects = [make_node("big", cpu="8"), make_node("small", cpu="4"), make_pod("web", requests={"cpu": "1"})]
    entry = run(objects, "default/web", profile=profile, registry=registry).entry
    assert entry["profile"] == profile.source
    assert entry["ranking"][0]["node"] == "small"  # MostAllocated: the fuller node first
    assert entry["scores"]["small"]["NodeResourcesFit"] > entry["scores"]["big"]["NodeResourcesFit"]


def test_unknown_pod() -> None:
    with pytest.raises(ExplainError, match='pod "default/nope" not found in the input'):
        run([make_node("a")], "nope")


def test_cli_json_table_node(capsys: pytest.CaptureFixture[str]) -> None:
    cluster = str(EXAMPLES / "cluster.yaml")
    assert main(["explain", "ml/inference-0", cluster, "-o", "json"]) == 0
    entry = json.loads(capsys.readouterr().out)
    assert set(entry) >= {"namespace", "name", "schedulerName", "result", "node", "nominatedNode", "victims",
                          "message", "filter", "scores", "preemption"}
    assert entry["filter"]["general-a1"]["reasons"] == ["Insufficient nvidia.com/gpu"]
    assert main(["explain", "ml/inference-0", cluster, "--node", "gpu-a1"]) == 0
    out = capsys.readouterr().out
    assert "Node gpu-a1:\n  Filter: rejected by TaintToleration (UnschedulableAndUnresolvable)\n" in out
    assert main(["explain", "ml/inference-0", cluster, "--node", "nope"]) == 1
    assert capsys.readouterr().err == 'node "nope" not found in the input\n'
    assert main(["explain", "shop/missing", cluster]) == 1
    assert capsys.readouterr().err == 'pod "shop/missing" not found in the input\n'
    with pytest.raises(SystemExit) as usage:
        main(["explain", "a/b/c", cluster])
    assert usage.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "kopfsched explain: error: argument NAMESPACE/NAME: 'a/b/c': expected NAMESPACE/NAME")


def test_readme_quick_start_shows_the_real_output(capsys: pytest.CaptureFixture[str]) -> None:
    readme = (EXAMPLES.parent / "README.md").read_text()
    for command in ("kopfsched explain ml/inference-0 examples/cluster.yaml",
                    "kopfsched simulate examples/cluster.yaml --compare examples/profiles/bin-packing.yaml"):
        start = readme.index(f"$ {command}\n") + len(f"$ {command}\n")
        end = min(i for i in (readme.find("\n$ ", start), readme.find("```", start)) if i != -1)
        shown = readme[start:end].rstrip("\n")
        argv = [a.replace("examples/", f"{EXAMPLES}/") for a in command.split()[1:]]
        assert main(argv) == 0
        assert capsys.readouterr().out.rstrip("\n") == shown, command


def _template_pod() -> list[dict[str, Any]]:
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "gpu", "namespace": "default"},
                "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}}
    pod = make_pod("trainer")
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]
    return [make_node("a"), template, pod]


def test_as_given_a_templates_claim_not_made_yet_keeps_the_pod_waiting() -> None:
    """As given, nobody makes the template's claim: v1.37.2 keeps the pod out of its queue
    (the differential tests' oracle says so); simulate makes it, as the controller would."""
    entry = run(_template_pod(), "default/trainer", as_given=True).entry
    assert (entry["result"], entry["message"]) == ("Gated", 'pod "default/trainer": ResourceClaim not created yet')
    simulated = run(_template_pod(), "default/trainer").entry
    assert simulated["result"] != "Gated"  # its claim was made: it was attempted

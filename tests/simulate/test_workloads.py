"""Workloads in simulate input become pods as their controllers would make them, never doubled."""

from __future__ import annotations

import asyncio
from typing import Any

from kopfsched.simulate.loader import load_objects
from kopfsched.simulate.output import to_json
from kopfsched.simulate.runner import simulate
from kopfsched.simulate.workloads import expand_workloads
from kopfsched.testing import make_node, make_pod, taint

TEMPLATE = {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "100m"}}}]}}


def workload(kind: str, name: str, *, uid: str | None = None, api: str = "apps/v1", **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "shop"}
    if uid:
        meta["uid"] = uid
    return {"apiVersion": api, "kind": kind, "metadata": meta,
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": TEMPLATE, **spec}}


def owned(pod: dict[str, Any], kind: str, name: str, uid: str | None = None) -> dict[str, Any]:
    ref = {"apiVersion": "apps/v1", "kind": kind, "name": name, "controller": True}
    if uid:
        ref["uid"] = uid
    pod["metadata"]["ownerReferences"] = [ref]
    return pod


def pods_of(objects: list[dict[str, Any]]) -> tuple[int, dict[str, dict[str, Any]], Any]:
    inputs = load_objects(objects, "test")
    assert not inputs.problems, inputs.problems
    made = expand_workloads(inputs)
    return made, {f"{p.obj['metadata']['namespace']}/{p.obj['metadata']['name']}": p.obj for p in inputs.pods}, inputs


def test_deployment_makes_a_replicaset_and_its_replicas() -> None:
    made, pods, inputs = pods_of([workload("Deployment", "web", uid="d1", replicas=3)])
    assert made == 3
    [rs] = [o.obj for o in inputs.objects if o.obj["kind"] == "ReplicaSet"]
    rs_name = rs["metadata"]["name"]
    assert rs_name.startswith("web-") and len(rs_name) == len("web-") + 10
    assert rs["metadata"]["ownerReferences"][0] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                                         "controller": True, "blockOwnerDeletion": True, "uid": "d1"}
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", "pod-template-hash": rs_name[4:]}
    assert len(pods) == 3
    for key, pod in pods.items():
        assert key.startswith(f"shop/{rs_name}-") and len(key) == len(f"shop/{rs_name}-") + 5
        assert pod["metadata"]["labels"] == {"app": "web", "pod-template-hash": rs_name[4:]}
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
        assert pod["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "100m"}}
    # Deterministic: the same input makes the same names (so --compare compares like with like).
    assert set(pods_of([workload("Deployment", "web", uid="d1", replicas=3)])[1]) == set(pods)


def test_a_live_snapshot_is_never_doubled() -> None:
    # Deployment -> ReplicaSet (uid r1, 3 replicas) -> 2 running pods: one replica is missing.
    deploy = workload("Deployment", "web", uid="d1", replicas=3)
    rs = owned(workload("ReplicaSet", "web-abc", uid="r1", replicas=3), "Deployment", "web", "d1")
    running = [owned(make_pod(f"web-abc-{i}", "shop", node_name="n1"), "ReplicaSet", "web-abc", "r1")
               for i in range(2)]
    stranger = owned(make_pod("other", "shop"), "ReplicaSet", "web-abc", "another-uid")  # same name, other uid
    made, pods, inputs = pods_of([make_node("n1"), deploy, rs, *running, stranger])
    assert made == 1
    assert [o.obj["metadata"]["name"] for o in inputs.objects if o.obj["kind"] == "ReplicaSet"] == ["web-abc"]
    assert len(pods) == 4
    assert expand_workloads(inputs) == 0  # a second expansion adds nothing


def test_statefulset_ordinals_claims_and_existing_members() -> None:
    sts = workload("StatefulSet", "db", replicas=3, serviceName="db",
                   volumeClaimTemplates=[{"metadata": {"name": "data"},
                                          "spec": {"accessModes": ["ReadWriteOnce"],
                                                   "resources": {"requests": {"storage": "1Gi"}}}}])
    existing = make_pod("db-1", "shop", node_name="n1")
    made, pods, inputs = pods_of([make_node("n1"), sts, existing])
    assert made == 2
    assert sorted(pods) == ["shop/db-0", "shop/db-1", "shop/db-2"]
    db0 = pods["shop/db-0"]
    assert db0["metadata"]["labels"] == {"app": "web", "statefulset.kubernetes.io/pod-name": "db-0",
                                         "apps.kubernetes.io/pod-index": "0"}
    assert db0["spec"]["hostname"] == "db-0" and db0["spec"]["subdomain"] == "db"
    assert db0["spec"]["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}}]
    claims = sorted(o.obj["metadata"]["name"] for o in inputs.objects if o.obj["kind"] == "PersistentVolumeClaim")
    assert claims == ["data-db-0", "data-db-2"]


def test_job_parallelism_completions_and_finished_jobs() -> None:
    job = workload("Job", "report", api="batch/v1", uid="j1", parallelism=4, completions=5)
    job["status"] = {"succeeded": 2}
    running = owned(make_pod("report-x", "shop"), "Job", "report", "j1")
    done = workload("Job", "old", api="batch/v1", parallelism=2)
    done["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    made, pods, _ = pods_of([job, running, done])
    assert made == 2  # min(4, 5 - 2) = 3 wanted, 1 running
    made_pods = [p for k, p in pods.items() if k != "shop/report-x"]
    assert all(p["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "report" for p in made_pods)
    assert all(p["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] == "j1" for p in made_pods)


def test_daemonset_one_pod_per_eligible_node_pinned_by_node_affinity() -> None:
    ds = workload("DaemonSet", "agent", uid="ds1")
    ds["spec"]["template"] = {**TEMPLATE, "spec": {**TEMPLATE["spec"], "nodeSelector": {"os": "linux"}}}
    nodes = [make_node("a", labels={"os": "linux"}), make_node("b", labels={"os": "linux"}),
             make_node("c", labels={"os": "windows"}),
             make_node("d", labels={"os": "linux"}, taints=[taint("dedicated", "gpu")]),
             make_node("e", labels={"os": "linux"}, unschedulable=True),
             make_node("f", labels={"os": "linux"}, taints=[taint("node.kubernetes.io/not-ready", "", "NoExecute")])]
    running = owned(make_pod("agent-x", "shop", node_name="a"), "DaemonSet", "agent", "ds1")
    made, pods, _ = pods_of([*nodes, ds, running])
    # a has one already; c does not match; d's taint is not tolerated; e (cordoned) and f
    # (not-ready) are tolerated by the daemon tolerations.
    made_pods = {p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                 ["nodeSelectorTerms"][0]["matchFields"][0]["values"][0]: p for k, p in pods.items()
                 if k != "shop/agent-x"}
    assert made == 3 and sorted(made_pods) == ["b", "e", "f"]
    tolerations = made_pods["b"]["spec"]["tolerations"]
    assert {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"} in tolerations
    assert {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"} in tolerations
    assert made_pods["b"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]}]}


def test_simulate_places_daemon_pods_on_their_nodes_and_deployment_replicas() -> None:
    ds = workload("DaemonSet", "agent")
    deploy = workload("Deployment", "web", replicas=2)
    inputs = load_objects([make_node("a"), make_node("b"), ds, deploy], "test")
    report = to_json(asyncio.run(simulate(inputs)), explain=False)
    placed = {p["name"]: p["node"] for p in report["pods"]}
    assert len(placed) == 4 and all(placed.values())
    agents = sorted(node for name, node in placed.items() if name.startswith("agent-"))
    assert agents == ["a", "b"]

"""`kopfsched plan`: which templates and how many, which pods no template helps and why,
which nodes could go and why the others stay; checked against a brute-force search over
template multisets on small generated clusters, and by simulating the plan's own output."""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import pathlib
import random
from typing import Any

import pytest

from kopfsched.cli import main
from kopfsched.simulate.loader import load_files, load_objects
from kopfsched.simulate.plan import NodeTemplate, load_templates, plan
from kopfsched.simulate.runner import simulate
from kopfsched.testing import make_node, make_pod, taint

ROOT = pathlib.Path(__file__).resolve().parents[2]
ZONE = "topology.kubernetes.io/zone"
RS = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-1", "controller": True}]
DS = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "ds-1", "controller": True}]


def owned(pod: dict[str, Any], refs: list[dict[str, Any]] = RS, **annotations: str) -> dict[str, Any]:
    pod["metadata"]["ownerReferences"] = copy.deepcopy(refs)
    if annotations:
        pod["metadata"]["annotations"] = dict(annotations)
    return pod


def template(name: str, *, cpu: str, price: float | None = None, max_count: int | None = None,
             **kwargs: Any) -> dict[str, Any]:
    node = make_node(name, cpu=cpu, memory="32Gi", **kwargs)
    del node["metadata"]["labels"]["kubernetes.io/hostname"]
    annotations = {}
    if price is not None:
        annotations["kopfsched.dev/price"] = str(price)
    if max_count is not None:
        annotations["kopfsched.dev/max-count"] = str(max_count)
    if annotations:
        node["metadata"]["annotations"] = annotations
    return node


def cluster() -> list[dict[str, Any]]:
    """Eight 2-CPU nodes, each showing one scale-down rule, and five pending pods."""
    nodes = [make_node(n, cpu="2", memory="8Gi", labels={ZONE: "z-a", **({"disk": "ssd"} if n == "full" else {})})
             for n in ("busy", "ds-only", "bare", "system", "local", "pinned", "budget", "full")]
    pods = [
        owned(make_pod("web-1", requests={"cpu": "500m"}, node_name="busy", labels={"app": "web"})),
        owned(make_pod("agent-ds-only", "kube-system", requests={"cpu": "100m"}, node_name="ds-only"), DS),
        make_pod("lonely", requests={"cpu": "500m"}, node_name="bare"),
        owned(make_pod("dns", "kube-system", requests={"cpu": "500m"}, node_name="system")),
        owned(make_pod("cache", requests={"cpu": "500m"}, node_name="local",
                       volumes=[{"name": "scratch", "emptyDir": {}}])),
        owned(make_pod("ledger", requests={"cpu": "500m"}, node_name="pinned"),
              **{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}),
        owned(make_pod("db-0", requests={"cpu": "500m"}, node_name="budget", labels={"app": "db"})),
        owned(make_pod("crunch", requests={"cpu": "1"}, node_name="full", node_selector={"disk": "ssd"})),
        make_pod("analytics", requests={"cpu": "6"}, creation_timestamp="2026-01-01T00:00:01Z"),
        make_pod("batch-1", requests={"cpu": "3"}, creation_timestamp="2026-01-01T00:00:02Z"),
        make_pod("batch-2", requests={"cpu": "3"}, creation_timestamp="2026-01-01T00:00:03Z"),
        make_pod("train", requests={"cpu": "1", "nvidia.com/gpu": "1"}, node_selector={"accelerator": "a100"},
                 tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
                 creation_timestamp="2026-01-01T00:00:04Z"),
        make_pod("nvme", requests={"cpu": "100m"}, node_selector={"disktype": "nvme"},
                 creation_timestamp="2026-01-01T00:00:05Z"),
    ]
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "db", "namespace": "default"},
           "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
           "status": {"disruptionsAllowed": 0}}
    return [*nodes, *pods, pdb]


def templates(*, prices: bool = False, big_max: int | None = None) -> list[dict[str, Any]]:
    return [
        template("big", cpu="8", price=4 if prices else None, max_count=big_max, labels={ZONE: "z-a"}),
        template("small", cpu="4", price=1 if prices else None, labels={ZONE: "z-a"}),
        template("gpu", cpu="8", price=10 if prices else None, labels={ZONE: "z-a", "accelerator": "a100"},
                 extended={"nvidia.com/gpu": 4}, taints=[taint("dedicated", "gpu")]),
    ]


def write(tmp_path: pathlib.Path, name: str, objects: list[dict[str, Any]]) -> str:
    path = tmp_path / name
    path.write_text("".join(f"---\n{json.dumps(o)}\n" for o in objects))
    return str(path)


def run_plan(tmp_path: pathlib.Path, capsys, snapshot: list[dict[str, Any]], node_templates: list[dict[str, Any]],
             *extra: str) -> dict[str, Any]:
    code = main(["plan", write(tmp_path, "cluster.yaml", snapshot), "--node-template",
                 write(tmp_path, "templates.yaml", node_templates), "-o", "json", *extra])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


NVME_WHY = {
    "big": {"plugin": "NodeAffinity", "code": "UnschedulableAndUnresolvable",
            "reasons": ["node(s) didn't match Pod's node affinity/selector"]},
    "small": {"plugin": "NodeAffinity", "code": "UnschedulableAndUnresolvable",
              "reasons": ["node(s) didn't match Pod's node affinity/selector"]},
    "gpu": {"plugin": "TaintToleration", "code": "UnschedulableAndUnresolvable",
            "reasons": ["node(s) had untolerated taint(s)"]},
}


def test_fewest_nodes_which_pods_no_template_helps_and_why(tmp_path, capsys) -> None:
    report = run_plan(tmp_path, capsys, cluster(), templates())
    assert [(g["template"], g["count"], g["nodes"]) for g in report["add"]] == [
        ("big", 2, ["big-1", "big-2"]), ("gpu", 1, ["gpu-1"])]
    assert {n["name"]: n["pods"] for n in report["addedNodes"]} == {
        "big-1": ["default/batch-1", "default/batch-2"], "big-2": ["default/analytics"], "gpu-1": ["default/train"]}
    assert [(p["name"], p["node"]) for p in report["helped"]] == [
        ("analytics", "big-2"), ("batch-1", "big-1"), ("batch-2", "big-1"), ("train", "gpu-1")]
    [nvme] = report["unhelped"]
    assert (nvme["name"], nvme["reason"], nvme["templates"]) == ("nvme", "no template can help", NVME_WHY)
    summary = report["summary"]
    assert (summary["nodesAdded"], summary["objective"], summary["minimal"], summary["verified"]) == \
        (3, "nodes", True, True)


def test_cheapest_nodes_when_templates_have_prices(tmp_path, capsys) -> None:
    report = run_plan(tmp_path, capsys, cluster(), templates(prices=True))
    assert [(g["template"], g["count"], g["price"]) for g in report["add"]] == [
        ("big", 1, 4.0), ("small", 2, 2.0), ("gpu", 1, 10.0)]
    assert (report["summary"]["cost"], report["summary"]["objective"], report["summary"]["minimal"]) == \
        (16.0, "price", True)


def test_a_templates_max_count_is_never_exceeded(tmp_path, capsys) -> None:
    report = run_plan(tmp_path, capsys, cluster(), templates(big_max=1))
    assert [(g["template"], g["count"]) for g in report["add"]] == [("big", 1), ("small", 2), ("gpu", 1)]
    assert report["summary"]["helped"] == 4


def test_scale_down_follows_cluster_autoscalers_rules(tmp_path, capsys) -> None:
    report = run_plan(tmp_path, capsys, cluster(), templates())
    assert report["remove"] == [
        {"node": "ds-only", "pods": []},
        {"node": "busy", "pods": [{"pod": "default/web-1", "node": "pinned"}]},
    ]
    keep = {k["node"]: (k["reason"], [(p["pod"], p["reason"]) for p in k["pods"]]) for k in report["keep"]}
    assert keep == {
        "bare": ("BlockedByPod", [("default/lonely", "NotReplicated")]),
        "system": ("BlockedByPod", [("kube-system/dns", "UnmovableKubeSystemPod")]),
        "local": ("BlockedByPod", [("default/cache", "LocalStorageRequested")]),
        "pinned": ("BlockedByPod", [("default/ledger", "NotSafeToEvictAnnotation")]),
        "budget": ("BlockedByPod", [("default/db-0", "NotEnoughPdb")]),
        "full": ("NoPlaceToMovePods", [("default/crunch", "NoPlaceToMovePods")]),
    }
    by_node = {k["node"]: k for k in report["keep"]}
    assert by_node["bare"]["message"] == "NotReplicated: default/lonely is not replicated"
    assert by_node["system"]["message"] == ("UnmovableKubeSystemPod: non-daemonset, non-mirrored, "
                                            "non-pdb-assigned kube-system pod present: dns")
    assert by_node["budget"]["pods"][0]["message"] == (
        "not enough pod disruption budget to move default/db-0 (PodDisruptionBudget default/db allows 0 more)")
    assert by_node["full"]["pods"][0]["message"] == (
        "0/8 nodes are available: 1 node(s) had untolerated taint(s), 7 node(s) didn't match Pod's node "
        "affinity/selector. preemption: 0/8 nodes are available: 8 Preemption is not helpful for scheduling.")
    assert report["summary"]["nodesRemovable"] == 2


def test_safe_to_evict_true_overrides_the_other_rules(tmp_path, capsys) -> None:
    objects = [make_node("a", cpu="2", memory="8Gi"), make_node("b", cpu="2", memory="8Gi"),
               make_pod("lonely", requests={"cpu": "500m"}, node_name="a",
                        volumes=[{"name": "scratch", "hostPath": {"path": "/tmp"}}])]
    objects[2]["metadata"]["annotations"] = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
    report = run_plan(tmp_path, capsys, objects, [template("t", cpu="4")])
    assert report["add"] == []
    assert [r["node"] for r in report["remove"]] == ["b"]  # empty first; then a's pod has nowhere left to go
    assert [(k["node"], k["reason"]) for k in report["keep"]] == [("a", "NoPlaceToMovePods")]


def test_apply_to_writes_a_snapshot_simulate_schedules_as_planned(tmp_path, capsys) -> None:
    applied = tmp_path / "planned.yaml"
    report = run_plan(tmp_path, capsys, cluster(), templates(), "--apply-to", str(applied))
    assert main(["simulate", str(applied), "-o", "json"]) == 0
    sim = json.loads(capsys.readouterr().out)
    placed = {f"{p['namespace']}/{p['name']}": p["node"] for p in sim["pods"] if p["result"] == "Scheduled"}
    assert {f"{p['namespace']}/{p['name']}": p["node"] for p in report["helped"]}.items() <= placed.items()
    assert placed["default/web-1"]  # moved off the removed node "busy"
    names = {n["name"] for n in sim["nodes"]}
    assert {"big-1", "big-2", "gpu-1"} <= names and not {"busy", "ds-only"} & names


def test_apply_to_as_documented(tmp_path, capsys, monkeypatch) -> None:
    """docs/plan.md's --apply-to commands, run from the repository's top into a scratch copy."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    assert main(["plan", "examples/cluster.yaml", "--node-template", "examples/node-templates.yaml",
                 "--apply-to", "planned.yaml"]) == 0
    capsys.readouterr()
    assert main(["simulate", "planned.yaml"]) == 0
    out = capsys.readouterr().out
    assert "analytics/analytics-warehouse-0  default-scheduler  Scheduled      general-large-1" in out
    assert "ml/train-giant-0                 default-scheduler  Scheduled      gpu-a100x8-1" in out
    assert main(["explain", "ml/train-giant-0", "planned.yaml"]) == 0
    assert "gpu-a100x8-1" in capsys.readouterr().out


# -- against a brute-force search ------------------------------------------------------------


def _settle(snapshot: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The snapshot once the pods that fit now are bound (as the planner starts from)."""
    first = asyncio.run(simulate(load_objects(copy.deepcopy(snapshot), "case")))
    return [o for o in snapshot if o["kind"] != "Pod"] + copy.deepcopy(list(first.client.pods.values()))


def _placed_with(settled: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> set[str]:
    """Pods bound once `nodes` joined the settled cluster."""
    sim = asyncio.run(simulate(load_objects(copy.deepcopy(settled) + copy.deepcopy(nodes), "case")))
    return {k for k, p in sim.client.pods.items() if p["spec"].get("nodeName")}


def _nodes_of(multiset: tuple[str, ...], by_name: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for i, name in enumerate(multiset):
        node = copy.deepcopy(by_name[name])
        node["metadata"]["name"] = f"bf-{name}-{i}"
        node["metadata"]["labels"]["kubernetes.io/hostname"] = f"bf-{name}-{i}"
        out.append(node)
    return out


def generated_case(seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rnd = random.Random(seed)
    zones = ["z-a", "z-b"]
    snapshot: list[dict[str, Any]] = [make_node(f"n{i}", cpu="2", memory="8Gi", labels={ZONE: zones[i % 2]})
                                      for i in range(2)]
    snapshot.append(owned(make_pod("resident", requests={"cpu": "1500m"}, node_name="n0")))
    for i in range(rnd.randint(3, 6)):
        requests = {"cpu": str(rnd.choice([1, 2, 3, 5])), "memory": f"{rnd.choice([1, 4, 12])}Gi"}
        pod = make_pod(f"p{i}", requests=requests, creation_timestamp=f"2026-01-01T00:00:0{i}Z")
        if rnd.random() < 0.3:
            pod["spec"]["nodeSelector"] = {ZONE: rnd.choice(zones)}
        if rnd.random() < 0.2:
            pod["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"spread": "yes"}}}]}}
            pod["metadata"]["labels"] = {"spread": "yes"}
        snapshot.append(pod)
    shapes = [("4", "16Gi"), ("6", "16Gi"), ("8", "32Gi")]
    node_templates = []
    for i in range(rnd.randint(2, 3)):
        cpu, memory = rnd.choice(shapes)
        node = make_node(f"t{i}", cpu=cpu, memory=memory, labels={ZONE: zones[i % 2]})
        del node["metadata"]["labels"]["kubernetes.io/hostname"]
        if seed % 2:  # odd seeds: by price
            node["metadata"]["annotations"] = {"kopfsched.dev/price": str(rnd.choice([1, 2, 3, 5]))}
        node_templates.append(node)
    return snapshot, node_templates


@pytest.mark.parametrize("seed", range(8))
def test_plan_size_matches_a_brute_force_search(seed: int) -> None:
    """Even seeds plan by node count, odd ones by price; the brute force tries every multiset
    of up to one node more than the plan (two, by price)."""
    snapshot, node_templates = generated_case(seed)
    found = [NodeTemplate(o["metadata"]["name"], o, price=_price(o)) for o in node_templates]
    report = asyncio.run(plan(load_objects(copy.deepcopy(snapshot), "case"), found)).report
    helped = {f"{p['namespace']}/{p['name']}" for p in report["helped"]}
    by_name = {t["metadata"]["name"]: t for t in node_templates}
    pending = {f"default/{p['metadata']['name']}" for p in snapshot if p["kind"] == "Pod" and
               not p["spec"].get("nodeName")}
    settled = _settle(snapshot)
    pending -= _placed_with(settled, [])  # the pods that fit now are no one's to help
    assert {f"{p['namespace']}/{p['name']}" for p in report["unhelped"]} | helped == pending
    size = report["summary"]["nodesAdded"]
    plan_cost = sum(g["price"] for g in report["add"]) if seed % 2 else size
    helped_by_any: set[str] = set()
    best = None
    for k in range(0, size + (3 if seed % 2 else 2)):
        for multiset in itertools.combinations_with_replacement(sorted(by_name), k):
            placed = _placed_with(settled, _nodes_of(multiset, by_name)) & pending
            helped_by_any |= placed  # no multiset places a pod the plan leaves out
            cost = sum(_price(by_name[t]) or 0 for t in multiset) if seed % 2 else k
            if helped <= placed and (best is None or cost < best):
                best = cost
    assert best == plan_cost, (seed, report["add"])
    assert helped_by_any <= helped, (seed, helped_by_any - helped)
    assert report["summary"]["verified"] and report["summary"]["minimal"]


def _price(template: dict[str, Any]) -> float | None:
    price = (template["metadata"].get("annotations") or {}).get("kopfsched.dev/price")
    return float(price) if price is not None else None


# -- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("templates_text", "message"), [
    ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n",
     "{path}: document 1: Pod/p: kind: a node template must be a Node"),
    ("# nothing\n", "{path}: no objects (the input is empty)"),
    ("kind: ResourceSlice\nmetadata: {name: gpus}\nspec: {nodeName: t}\n",
     "{path}: document 1: ResourceSlice/gpus: spec.nodeName: no node template named 't'"),
    ("kind: Node\nmetadata: {name: t, annotations: {kopfsched.dev/price: cheap}}\n",
     "{path}: document 1: Node/t: metadata.annotations[kopfsched.dev/price]: must be a number of at least 0, "
     "got 'cheap'"),
    ("kind: Node\nmetadata: {name: t, annotations: {kopfsched.dev/max-count: '-1'}}\n",
     "{path}: document 1: Node/t: metadata.annotations[kopfsched.dev/max-count]: must be a whole number, got '-1'"),
], ids=["not-a-node", "empty-file", "slice-of-no-template", "bad-price", "bad-max-count"])
def test_bad_templates_give_one_line_and_exit_1(tmp_path, capsys, templates_text, message) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(templates_text)
    assert main(["plan", str(ROOT / "examples" / "cluster.yaml"), "--node-template", str(path)]) == 1
    out, err = capsys.readouterr()
    assert (out, err) == ("", message.format(path=path) + "\n")


def test_no_template_flag_and_an_empty_snapshot_give_one_line_and_exit_1(tmp_path, capsys) -> None:
    assert main(["plan", str(ROOT / "examples" / "cluster.yaml")]) == 1
    assert capsys.readouterr().err == "no node templates: give --node-template F (a file of Node objects)\n"
    empty = tmp_path / "empty.yaml"
    empty.write_text("# no objects\n")
    assert main(["plan", str(empty), "--node-template", str(ROOT / "examples" / "node-templates.yaml")]) == 1
    assert capsys.readouterr().err == f"{empty}: no objects (the input is empty)\n"
    empty.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n")
    assert main(["plan", str(empty), "--node-template", str(ROOT / "examples" / "node-templates.yaml")]) == 1
    assert capsys.readouterr().err == f"{empty}: nothing to plan: no Nodes, Pods or workloads in it\n"


def test_an_unwritable_apply_to_is_refused_before_planning(tmp_path, capsys) -> None:
    assert main(["plan", str(ROOT / "examples" / "cluster.yaml"), "--node-template",
                 str(ROOT / "examples" / "node-templates.yaml"), "--apply-to", str(tmp_path)]) == 1
    assert capsys.readouterr().err == f"{tmp_path}: cannot write: Is a directory\n"


def test_the_example_templates_load() -> None:
    found, problems = load_templates([str(ROOT / "examples" / "node-templates.yaml")])
    assert problems == []
    assert [(t.name, t.price, t.max_count) for t in found] == [
        ("general-large", 1.536, 4), ("general-small", 0.384, None), ("gpu-a100x8", 32.77, 2)]
    assert load_files([str(ROOT / "examples" / "cluster.yaml")]).problems == []


# -- DRA: the template's ResourceSlices -------------------------------------------------------


def test_a_templates_resource_slices_are_its_devices(tmp_path, capsys) -> None:
    """examples/dra.yaml's llm-finetune needs four 40Gi GPUs on one PCIe root: a node whose slice
    puts four A100s on one root helps it; the L4 shape (24Gi) cannot allocate the claim."""
    import yaml

    docs = list(yaml.safe_load_all((ROOT / "examples" / "dra.yaml").read_text()))
    nodes = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Node"}
    slices = {d["spec"]["nodeName"]: d for d in docs if d["kind"] == "ResourceSlice"}
    shapes = []
    for source, name in (("gpu-a100-1", "a100-one-root"), ("gpu-l4-1", "l4")):
        node = copy.deepcopy(nodes[source])
        node["metadata"] = {"name": name, "labels": {k: v for k, v in node["metadata"]["labels"].items()
                                                     if k != "kubernetes.io/hostname"}}
        piece = copy.deepcopy(slices[source])
        piece["metadata"]["name"] = "gpus"
        piece["spec"]["nodeName"] = name
        piece["spec"]["pool"]["name"] = name
        for device in piece["spec"]["devices"]:
            device["attributes"]["pcieRoot"] = {"string": "pci0000:00"}
        shapes += [node, piece]
    path = tmp_path / "templates.yaml"
    path.write_text("".join(f"---\n{json.dumps(o)}\n" for o in shapes))
    assert main(["plan", str(ROOT / "examples" / "dra.yaml"), "--node-template", str(path), "-o", "json",
                 "--apply-to", str(tmp_path / "planned.yaml")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["add"] == [{"template": "a100-one-root", "count": 1, "price": None, "nodes": ["a100-one-root-1"]}]
    assert report["helped"] == [{"namespace": "ml", "name": "llm-finetune", "node": "a100-one-root-1"}]
    planned = [json.loads(line) for line in (tmp_path / "planned.yaml").read_text().splitlines()
               if line.startswith("{")]
    [made] = [o for o in planned if o["kind"] == "ResourceSlice" and o["spec"]["nodeName"] == "a100-one-root-1"]
    assert (made["metadata"]["name"], made["spec"]["pool"]["name"]) == ("a100-one-root-1-gpus", "a100-one-root-1")


def test_new_nodes_run_the_daemon_sets_pods_too(tmp_path, capsys) -> None:
    """A DaemonSet's pod takes a CPU on every node, new ones included: two 2-CPU pods need two
    4-CPU nodes, not one."""
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "kube-system",
                                                                       "uid": "ds-agent"},
          "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {
              "metadata": {"labels": {"app": "agent"}},
              "spec": {"containers": [{"name": "a", "image": "agent", "resources": {"requests": {"cpu": "1"}}}]}}}}
    snapshot = [make_node("n1", cpu="1", memory="8Gi"), ds,
                make_pod("a", requests={"cpu": "2"}), make_pod("b", requests={"cpu": "2"})]
    report = run_plan(tmp_path, capsys, snapshot, [template("t", cpu="4")])
    assert [(g["template"], g["count"]) for g in report["add"]] == [("t", 2)]
    pods = {n["name"]: n["pods"] for n in report["addedNodes"]}
    assert pods == {"t-1": ["default/b", "kube-system/agent-t-1"], "t-2": ["default/a", "kube-system/agent-t-2"]}
    assert report["summary"]["verified"] and report["summary"]["minimal"]


def test_scale_down_disabled_and_a_kube_system_pod_with_a_pdb(tmp_path, capsys) -> None:
    locked = make_node("locked", cpu="2", memory="8Gi")
    locked["metadata"]["annotations"] = {"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"}
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
           "metadata": {"name": "dns", "namespace": "kube-system"},
           "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "dns"}}},
           "status": {"disruptionsAllowed": 1}}
    objects = [locked, make_node("system", cpu="2", memory="8Gi"), make_node("roomy", cpu="4", memory="8Gi"), pdb,
               owned(make_pod("dns", "kube-system", requests={"cpu": "1"}, node_name="system", labels={"app": "dns"})),
               owned(make_pod("web", requests={"cpu": "3"}, node_name="roomy"))]
    report = run_plan(tmp_path, capsys, objects, [template("t", cpu="4")])
    assert report["remove"] == [{"node": "system", "pods": [{"pod": "kube-system/dns", "node": "locked"}]}]
    assert [(k["node"], k["reason"], k["message"]) for k in report["keep"]] == [
        ("locked", "ScaleDownDisabledAnnotation",
         "node is annotated cluster-autoscaler.kubernetes.io/scale-down-disabled=true"),
        ("roomy", "NoPlaceToMovePods", "no place to move default/web: 0/1 nodes are available: 1 Insufficient cpu. "
                                       "preemption: 0/1 nodes are available: 1 Preemption is not helpful for "
                                       "scheduling."),
    ]


def test_a_bound_volumes_zone_decides_the_template(tmp_path, capsys) -> None:
    """The pod's claim is bound to a volume in zone z1: only the z1 template helps; the z2
    one fails VolumeBinding with upstream's reason."""
    pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "data"},
          "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "standard",
                   "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "data"},
                   "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1"},
                   "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                       {"key": ZONE, "operator": "In", "values": ["z1"]}]}]}}},
          "status": {"phase": "Bound"}}
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
           "metadata": {"name": "data", "namespace": "default",
                        "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
           "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "standard", "volumeName": "data",
                    "resources": {"requests": {"storage": "10Gi"}}}, "status": {"phase": "Bound"}}
    sc = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "standard"},
          "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "Immediate"}
    pod = make_pod("db", requests={"cpu": "3"},
                   volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}])
    snapshot = [make_node("small", cpu="1", memory="8Gi", labels={ZONE: "z1"}), sc, pv, pvc, pod]
    node_templates = [template("z2-node", cpu="4", labels={ZONE: "z2"}),
                      template("z1-node", cpu="4", labels={ZONE: "z1"})]
    report = run_plan(tmp_path, capsys, snapshot, node_templates)
    assert report["add"] == [{"template": "z1-node", "count": 1, "price": None, "nodes": ["z1-node-1"]}]
    assert report["helped"] == [{"namespace": "default", "name": "db", "node": "z1-node-1"}]
    only_z2 = run_plan(tmp_path, capsys, snapshot, node_templates[:1])
    assert only_z2["add"] == []
    assert [(p["name"], p["templates"]) for p in only_z2["unhelped"]] == [("db", {"z2-node": {
        "plugin": "VolumeBinding", "code": "UnschedulableAndUnresolvable",
        "reasons": ["node(s) didn't match PersistentVolume's node affinity"]}})]


def test_snapshot_and_templates_cannot_both_be_stdin(capsys) -> None:
    assert main(["plan", "-", "--node-template", "-"]) == 1
    assert capsys.readouterr().err == "<stdin>: standard input can be read only once\n"

"""`simulate --compare` and `--reschedule-all`: exact changed pods, utilization and freed nodes."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from kopfsched.cli import main
from kopfsched.simulate.compare import unbind_all
from kopfsched.simulate.loader import load_objects
from kopfsched.testing import make_node, make_pod

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PACKED = str(EXAMPLES / "profiles" / "packed-default.yaml")


def _write(tmp_path: Path, objects: list[dict]) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return str(path)


def _nodes() -> list[dict]:
    return [make_node("a", cpu="8", memory="32Gi"), make_node("b", cpu="6", memory="32Gi"),
            make_node("c", cpu="4", memory="32Gi")]


def test_compare_lists_every_changed_pod_and_the_freed_nodes(tmp_path: Path, capsys) -> None:
    pods = [make_pod(f"p{i}", requests={"cpu": "1"}, creation_timestamp=f"2026-01-01T00:00:0{i}Z") for i in range(2)]
    assert main(["simulate", _write(tmp_path, [*_nodes(), *pods]), "--compare", PACKED, "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) == {"before", "after", "changes", "emptyNodes"}
    # Spread (LeastAllocated): the emptiest node each time; packed (MostAllocated): the fullest.
    assert report["changes"] == [
        {"namespace": "default", "name": "p0", "before": {"result": "Scheduled", "node": "a"},
         "after": {"result": "Scheduled", "node": "c"}},
        {"namespace": "default", "name": "p1", "before": {"result": "Scheduled", "node": "b"},
         "after": {"result": "Scheduled", "node": "c"}},
    ]
    assert report["emptyNodes"] == {"before": ["c"], "after": ["a", "b"]}
    after = {n["name"]: n for n in report["after"]["nodes"]}
    assert after["c"]["requested"]["cpu"] == "2" and after["a"]["pods"] == 0

    assert main(["simulate", _write(tmp_path, [*_nodes(), *pods]), "--compare", PACKED]) == 0
    table = capsys.readouterr().out
    assert table.startswith("2 pod(s) change:\nPOD         BEFORE       AFTER\ndefault/p0  Scheduled a  Scheduled c\n")
    assert "\na     12% -> 0%  0% -> 0%  1 -> 0\n" in table
    assert "\nc     0% -> 50%  0% -> 0%  0 -> 2\n" in table
    assert "\nc     0% -> 50%  0% -> 0%  0 -> 2\n0 other node(s) unchanged.\n" in table
    assert "Empty nodes (no pods but DaemonSet and static ones): 1 before, 2 after; freed:\n  a, b\n" in table


def test_compare_unchanged_and_unschedulable_changes(tmp_path: Path, capsys) -> None:
    pods = [make_pod("big", requests={"cpu": "7"}), make_pod("small", requests={"cpu": "1"}, node_name="a"),
            make_pod("report", requests={"cpu": "1"}, scheduler_name="bin-packing")]
    bin_packing = str(EXAMPLES / "profiles" / "bin-packing.yaml")
    assert main(["simulate", _write(tmp_path, [*_nodes(), *pods]), "--compare", bin_packing, "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    # big fits on a alone under either profile, which it fills; report has a profile only after,
    # which packs it on the fuller of b and c.
    assert report["changes"] == [{"namespace": "default", "name": "report",
                                  "before": {"result": "NotHandled", "node": None},
                                  "after": {"result": "Scheduled", "node": "c"}}]


def test_reschedule_all_keeps_static_mirror_and_daemonset_pods() -> None:
    ds = make_pod("agent", node_name="a")
    ds["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent",
                                          "uid": "u1", "controller": True}]
    mirror = make_pod("etcd", node_name="a")
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    web = make_pod("web", node_name="b")
    web["status"] = {"nominatedNodeName": "b", "conditions": [{"type": "PodScheduled", "status": "True"},
                                                              {"type": "Ready", "status": "True"}]}
    inputs = load_objects([*_nodes(), ds, mirror, web], "test")
    assert unbind_all(inputs) == 1
    specs = {p.obj["metadata"]["name"]: p.obj for p in inputs.pods}
    assert specs["agent"]["spec"]["nodeName"] == "a" and specs["etcd"]["spec"]["nodeName"] == "a"
    assert "nodeName" not in specs["web"]["spec"]
    assert specs["web"]["status"] == {"conditions": [{"type": "Ready", "status": "True"}]}


def test_reschedule_all_places_every_pod_again_in_creation_order(tmp_path: Path, capsys) -> None:
    pods = [make_pod(f"p{i}", requests={"cpu": "1"}, node_name="c", creation_timestamp=f"2026-01-01T00:00:0{i}Z")
            for i in range(2)]
    path = _write(tmp_path, [*_nodes(), *pods])
    assert main(["simulate", path, "--reschedule-all", "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [(p["name"], p["node"]) for p in report["pods"]] == [("p0", "a"), ("p1", "b")]


@pytest.mark.parametrize("bad", ["missing.yaml"])
def test_compare_with_a_bad_profile_file_is_one_line(tmp_path: Path, capsys, bad: str) -> None:
    assert main(["simulate", _write(tmp_path, _nodes()), "--compare", str(tmp_path / bad)]) == 1
    err = capsys.readouterr().err
    assert "cannot read" in err


def test_the_second_run_gets_a_deep_copy_of_the_input() -> None:
    """ClusterInput.copy (what --compare's second run schedules) gives what copy.deepcopy gives:
    equal, independent, and objects shared within the input stay shared within the copy."""
    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}], "priority": 5}
    pods = [{"kind": "Pod", "metadata": {"name": f"p{i}", "labels": {"app": "web"}}, "spec": spec} for i in range(2)]
    inputs = load_objects([make_node("a", cpu="4"), *pods, {"kind": "ConfigMap", "metadata": {"name": "x"}}], "<test>")
    copied, expected = inputs.copy(), copy.deepcopy(inputs)
    assert copied == expected
    first, second = (loaded.obj for loaded in copied.pods)
    assert first["spec"] is second["spec"]
    assert first["spec"] is not spec
    first["spec"]["containers"][0]["name"] = "changed"
    assert spec["containers"][0]["name"] == "c"
    assert copied.skipped == inputs.skipped and copied.skipped is not inputs.skipped

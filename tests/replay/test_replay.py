"""`kopfsched replay` on small hand-built histories: exact waits, backoff on the virtual clock,
exact series, preemption, --compare, and every kind of bad input as one line and exit 1."""

from __future__ import annotations

import asyncio
import json
import pathlib
from typing import Any

import pytest
import yaml

from kopfsched import features
from kopfsched.cli import main
from kopfsched.simulate import history
from kopfsched.simulate.loader import load_objects
from kopfsched.simulate.replay import choose_step, percentile, replay
from kopfsched.simulate.replay_output import compare_json, to_json
from kopfsched.testing import make_node

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
PACKED = str(EXAMPLES / "profiles" / "packed-default.yaml")


def run(nodes: list[dict[str, Any]], trace: str, *, objects: list[dict[str, Any]] = (),
        gates: str = "") -> dict[str, Any]:
    saved = features.GATES
    try:
        features.set_gates(features.parse(gates))
        inputs = load_objects([*nodes, *objects], "test")
        hist = history.build(inputs, ["trace.csv"], texts={"trace.csv": trace})
        assert hist.problems == []
        return to_json(asyncio.run(replay(hist)))
    finally:
        features.set_gates(saved)


def pods(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in report["pods"]}


def test_a_pod_waits_until_another_departs() -> None:
    report = run([make_node("n1", cpu=4, memory="8Gi")], "name,arrival,duration,cpu,memory\n"
                 "a,0,100,3,1Gi\n"
                 "b,10,50,3,1Gi\n"
                 "c,20,,1,1Gi\n")
    by_name = pods(report)
    assert by_name["b"] == {"namespace": "default", "name": "b", "state": "Departed", "arrival": 10.0,
                            "scheduled": 100.0, "node": "n1", "end": 150.0, "wait": 90.0}
    assert by_name["c"]["wait"] == 0.0 and by_name["c"]["state"] == "Running"
    assert report["wait"] == {"count": 3, "p50": 0.0, "p90": 90.0, "p99": 90.0, "max": 90.0, "mean": 30.0}
    assert report["end"] == 150.0 and report["step"] == 1.0
    summary = report["summary"]
    assert (summary["arrived"], summary["scheduled"], summary["departed"], summary["running"],
            summary["pending"], summary["peakPending"]) == (3, 3, 2, 1, 0, 1)
    series = report["series"]
    assert series["pending"][9:12] == [0, 1, 1] and series["pending"][99:101] == [1, 0]
    # The allocation kept as pods bind and leave is the cache's own sum over the nodes.
    assert [series["allocated"][r][-1] for r in ("cpu", "memory")] == [1.0, 2**30]
    assert report["nodes"][0]["requested"] == {"cpu": "1", "memory": "1Gi"}


@pytest.mark.parametrize(("gates", "backoff", "bound_at"), [
    ("SchedulerPopFromBackoffQ=false", None, 11.0),  # backoffQ until the 1 s initial backoff ends
    ("SchedulerPopFromBackoffQ=false", 4, 14.0),
    ("", None, 10.5),  # upstream's default: an idle scheduler pops the backing-off pod at once
], ids=["backoff-1s", "backoff-4s", "pop-from-backoff"])
def test_backoff_runs_on_the_virtual_clock(gates: str, backoff: int | None, bound_at: float) -> None:
    objects = []
    if backoff is not None:
        objects.append({"apiVersion": "kopfsched.dev/v1alpha1", "kind": "SchedulerProfile",
                        "metadata": {"name": "slow"},
                        "spec": {"schedulerName": "default-scheduler", "podInitialBackoffSeconds": backoff}})
    report = run([make_node("n1", cpu=4)], "name,arrival,duration,cpu\na,0,10.5,3\nb,10,,3\n",
                 objects=objects, gates=gates)
    # b fails at 10 (a holds the node) and waits in the unschedulable pool; a's departure at
    # 10.5 moves it back, to backoffQ while its backoff (from its attempt at 10) lasts.
    assert pods(report)["b"]["scheduled"] == bound_at
    assert report["wait"]["max"] == bound_at - 10


GPU_NODES = [make_node("cpu-node", cpu=4, memory="8Gi"),
             make_node("gpu-node", cpu=8, memory="16Gi", extended={"nvidia.com/gpu": 4})]
GPU_TRACE = ("name,arrival,duration,cpu,memory,gpu\n"
             "g1,0,3,1,1Gi,2\n"
             "x,1,2,2,1Gi,\n"
             "g2,1,2,1,1Gi,4\n")


def test_allocation_and_fragmentation_series_exact() -> None:
    report = run(GPU_NODES, GPU_TRACE)
    assert report["resources"] == ["cpu", "memory", "nvidia.com/gpu"]
    assert report["capacity"] == {"cpu": 12.0, "memory": 24 * 2**30, "nvidia.com/gpu": 4}
    series = report["series"]
    assert series["t"] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert series["allocated"]["cpu"] == [1.0, 3.0, 3.0, 1.0, 1.0, 0.0]
    assert series["allocated"]["nvidia.com/gpu"] == [2, 2, 2, 4, 4, 0]
    assert series["pending"] == [0, 1, 1, 0, 0, 0]
    assert series["running"] == [1, 2, 2, 1, 1, 0]
    # g2 (4 GPUs) could run on gpu-node were it empty, but g1 holds two GPUs (and x, spread
    # there, 2 CPUs): gpu-node's free amounts are stranded; cpu-node, where g2 can never run, is not.
    assert pods(report)["x"]["node"] == "gpu-node"
    assert series["fragmented"]["nvidia.com/gpu"] == [0, 2, 2, 0, 0, 0]
    assert series["fragmented"]["cpu"] == [0.0, 5.0, 5.0, 0.0, 0.0, 0.0]
    assert series["fragmented"]["memory"] == [0, 14 * 2**30, 14 * 2**30, 0, 0, 0]
    assert series["waitMax"] == [0.0, 0.0, None, 2.0, None, None]
    assert pods(report)["g2"]["scheduled"] == 3.0
    assert report["allocation"]["nvidia.com/gpu"] == {"mean": round(14 / 6 / 4, 4), "peak": 1.0}
    assert report["fragmentation"]["nvidia.com/gpu"] == {"mean": round(4 / (2 + 2 + 2 + 0 + 0 + 4), 4),
                                                         "peak": 1.0}


def test_fragmentation_counts_only_nodes_a_pending_pod_could_use() -> None:
    nodes = [make_node("a", cpu=4), make_node("b", cpu=4, taints=[{"key": "dedicated", "value": "gpu",
                                                                  "effect": "NoSchedule"}])]
    report = run(nodes, "name,arrival,cpu,tolerations\n"
                 "p1,0,3,\n"
                 "p2,1,2,\n"  # a has 1 CPU free, b's taint keeps it off: pending
                 "huge,2,8,dedicated=gpu:NoSchedule\n")  # bigger than any node: it strands nothing
    assert pods(report)["p1"]["node"] == "a"
    assert report["series"]["pending"] == [0, 1, 2]
    # a's free CPU is stranded (p2 would run there were a empty); b's is idle, not fragmented.
    assert report["series"]["fragmented"]["cpu"] == [0.0, 1.0, 1.0]


def test_a_preemption_is_counted_and_its_victim_does_not_come_back() -> None:
    report = run([make_node("n1", cpu=4)], "name,arrival,duration,cpu,priority\n"
                 "low,0,,3,0\n"
                 "high,10,5,3,100\n")
    assert report["preemptions"] == [{"t": 10.0, "preemptor": "default/high", "node": "n1",
                                      "victims": ["default/low"]}]
    by_name = pods(report)
    assert (by_name["low"]["state"], by_name["low"]["end"]) == ("Preempted", 10.0)
    assert (by_name["high"]["scheduled"], by_name["high"]["state"], by_name["high"]["end"]) == (10.0, "Departed", 15.0)
    assert report["summary"]["preempted"] == 1
    assert report["series"]["preempted"][9:11] == [0, 1]
    assert report["end"] == 15.0


def test_a_pod_still_pending_at_its_departure_is_withdrawn() -> None:
    report = run([make_node("n1", cpu=2)], "name,arrival,departure,cpu\nbig,5,20,4\n")
    assert pods(report)["big"] == {"namespace": "default", "name": "big", "state": "Withdrawn", "arrival": 5.0,
                                   "scheduled": None, "node": None, "end": 20.0, "wait": None}
    series = report["series"]  # from the first arrival to the last moment something happened
    assert (series["t"][0], series["t"][-1], len(series["t"])) == (5.0, 20.0, 16)
    assert series["pending"] == [1] * 15 + [0]
    assert report["wait"]["count"] == 0


def test_a_pod_leaving_as_it_arrives_never_arrives() -> None:
    report = run([make_node("n1", cpu=2)], "name,arrival,departure,cpu\nflash,3,3,1\nother,0,5,1\n")
    assert pods(report)["flash"] == {"namespace": "default", "name": "flash", "state": "Withdrawn", "arrival": 3.0,
                                     "scheduled": None, "node": None, "end": 3.0, "wait": None}
    assert report["series"]["running"] == [1, 1, 1, 1, 1, 0]
    assert (report["summary"]["arrived"], report["summary"]["withdrawn"]) == (1, 1)


COMPARE_NODES = [make_node("n1", cpu=4), make_node("n2", cpu=4)]
COMPARE_TRACE = "name,arrival,cpu,memory\na,0,2,1Gi\nb,1,2,1Gi\nc,2,4,1Gi\n"


def test_compare_packed_against_spread() -> None:
    inputs = load_objects(COMPARE_NODES, "test")
    hist = history.build(inputs, ["t.csv"], texts={"t.csv": COMPARE_TRACE})
    packed = [loaded for loaded in load_objects(yaml.safe_load_all(pathlib.Path(PACKED).read_text()), PACKED).configs]
    from kopfsched.plugins.registry import full_registry
    from kopfsched.simulate.runner import build_profiles

    registry = full_registry()
    overrides = [p for p in build_profiles(load_objects([c.obj for c in packed], PACKED), registry)
                 if p.source != "default"]
    before = to_json(asyncio.run(replay(hist, registry=registry)))
    after = to_json(asyncio.run(replay(hist, registry=registry, overrides=overrides)))
    report = compare_json(before, after)
    # Spread: a and b on different nodes, and c (a whole node) never fits; packed: it does.
    assert (before["summary"]["pending"], after["summary"]["pending"]) == (1, 0)
    assert before["series"]["fragmented"]["cpu"][-1] == 4.0
    assert after["series"]["fragmented"]["cpu"][-1] == 0.0
    assert report["delta"]["pending"] == -1 and report["delta"]["scheduled"] == 1
    assert sorted({p["node"] for p in after["pods"]}) == ["n1", "n2"]
    assert len({pods(after)["a"]["node"], pods(after)["b"]["node"]}) == 1


def test_snapshot_pods_arrive_at_their_creation_and_run_their_duration(tmp_path: pathlib.Path, capsys) -> None:
    cluster = [make_node("n1", cpu=2),
               {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "old", "namespace": "default", "creationTimestamp": "2024-05-01T09:00:00Z",
                             "annotations": {history.DEPARTURE_ANNOTATION: "2024-05-01T10:00:30Z"}},
                "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}},
               {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "new", "namespace": "default", "creationTimestamp": "2024-05-01T10:00:00Z",
                             "annotations": {history.DURATION_ANNOTATION: "1m"}},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}}]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(cluster))
    assert main(["replay", str(path), "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["origin"] == "2024-05-01T10:00:00Z"
    assert pods(report)["new"] == {"namespace": "default", "name": "new", "state": "Departed", "arrival": 0.0,
                                   "scheduled": 30.0, "node": "n1", "end": 90.0, "wait": 30.0}
    assert pods(report)["old"]["state"] == "Departed" and pods(report)["old"]["end"] == 30.0


def test_alibaba_trace_columns_are_read(tmp_path: pathlib.Path) -> None:
    hist = history.build(load_objects(GPU_NODES, "test"), ["openb.csv"], texts={"openb.csv": (
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
        "scheduled_time\n"
        "openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0\n")})
    assert hist.problems == []
    assert hist.warnings == ["warning: openb.csv: columns ignored: gpu_milli, gpu_spec, qos, pod_phase, "
                             "scheduled_time"]
    [entry] = hist.entries
    assert entry.arrival == 0.0 and entry.departure == 12537496.0
    assert entry.loaded.obj["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "12000m", "memory": "16384Mi", "nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}


def test_step_and_percentile() -> None:
    assert [choose_step(s) for s in (0, 240, 241, 3600, 86400 * 30)] == [1.0, 1.0, 2.0, 15.0, 10800.0]
    assert [percentile([5, 1, 3, 2, 4], q) for q in (50, 90, 99)] == [3, 5, 5]
    assert percentile([], 50) is None


# -- bad input: one line, exit 1 ------------------------------------------------------------


NODE_YAML = yaml.safe_dump(make_node("n1"))


@pytest.mark.parametrize(("trace", "expected"), [
    ("name,arrival,departure,cpu\na,20,10,1\n", "trace.csv:2: pod default/a: departure 10s is before its arrival 20s"),
    ("", "trace.csv: empty trace: no header and no rows"),
    ("# a comment only\n", "trace.csv: empty trace: no header and no rows"),
    ("name,arrival,cpu\n", "trace.csv: empty trace: a header and no rows"),
    ("name,arrival,cpu\na,0,1\nb,1,abc\n", "trace.csv:3: cpu: 'abc' is not a quantity"),
    ("name,arrival,cpu\na,0,1,7\n", "trace.csv:2: 4 fields, the header has 3"),
    ("name,arrival,cpu\na,soon,1\n", "trace.csv:2: arrival: 'soon' is not a time (seconds or RFC 3339)"),
    ("name,arrival,duration\na,0,-5\n", "trace.csv:2: duration: '-5' is not a duration (seconds, or such as 90s, "
                                        "1h30m)"),
    ("name,cpu\na,1\n", "trace.csv:1: header: no arrival column (the columns are: name, cpu)"),
    ("name,arrival\na,0\na,1\n", "trace.csv:3: pod default/a: already given at trace.csv:2"),
], ids=["departure-before-arrival", "empty", "comments-only", "header-only", "bad-quantity", "field-count",
        "bad-time", "negative-duration", "no-arrival-column", "repeated-pod"])
def test_bad_traces_are_one_line_and_exit_1(tmp_path: pathlib.Path, capsys, trace: str, expected: str,
                                            monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nodes.yaml").write_text(NODE_YAML)
    (tmp_path / "trace.csv").write_text(trace)
    assert main(["replay", "nodes.yaml", "trace.csv"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == expected + "\n"


def test_yaml_departure_before_arrival(tmp_path: pathlib.Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "namespace": "default", "creationTimestamp": "2024-05-01T10:00:00Z",
                        "annotations": {history.DEPARTURE_ANNOTATION: "2024-05-01T09:59:00Z"}},
           "spec": {"containers": [{"name": "c"}]}}
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all([make_node("n1"), pod]))
    assert main(["replay", "cluster.yaml"]) == 1
    assert capsys.readouterr().err == ("cluster.yaml: document 2: pod default/p: departure -60s is before its "
                                       "arrival 0s\n")


@pytest.mark.parametrize(("files", "expected"), [
    (["trace.csv"], "nothing to replay on: no Nodes in the input"),
    (["nodes.yaml"], "nothing to replay: no pod arrives (every pod is bound already, or none is given)"),
    (["nodes.yaml", "missing.csv"], "missing.csv: cannot read: No such file or directory"),
])
def test_nothing_to_replay(tmp_path: pathlib.Path, capsys, monkeypatch, files: list[str], expected: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nodes.yaml").write_text(NODE_YAML)
    (tmp_path / "trace.csv").write_text("name,arrival\na,0\n")
    assert main(["replay", *files]) == 1
    assert capsys.readouterr().err == expected + "\n"


def test_table_and_compare_on_the_command_line(tmp_path: pathlib.Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nodes.yaml").write_text(yaml.safe_dump_all(COMPARE_NODES))
    (tmp_path / "trace.csv").write_text(COMPARE_TRACE)
    assert main(["replay", "nodes.yaml", "trace.csv"]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[1] == ("pods: 3 arrived, 2 scheduled, 0 departed, 0 preempted, 2 running and 1 pending "
                                     "at the end, 0 withdrawn while pending (peak pending 1)")
    assert main(["replay", "nodes.yaml", "trace.csv", "--compare", PACKED, "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert sorted(report) == ["after", "before", "delta"]
    assert report["delta"]["pending"] == -1
    assert main(["replay", "nodes.yaml", "trace.csv", "--compare", PACKED]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["BEFORE", "AFTER"]
    assert lines[2].split() == ["pending", "at", "the", "end", "1", "0"]

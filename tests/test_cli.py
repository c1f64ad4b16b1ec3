"""The `kopfsched` command's offline subcommands through `kopfsched.cli.main`: output
formats, one clear stderr line per bad input with exit status 1, usage errors with 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kopfsched.cli import main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

GOOD = """\
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata: {name: good, namespace: default}
spec: {containers: [{name: c, image: x, resources: {requests: {cpu: 100m}}}]}
"""


def test_simulate_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(EXAMPLES / "cluster.yaml")]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].split() == ["POD", "SCHEDULER", "RESULT", "NODE", "MESSAGE"]
    assert lines[1].split()[:3] == ["shop/frontend-0", "default-scheduler", "Scheduled"]
    assert any(line.split()[:3] == ["batch/quota-job-0", "default-scheduler", "Gated"] for line in lines)
    assert any(line.split() == ["NODE", "PODS", "CPU", "(requested/allocatable)", "MEMORY",
                                "(requested/allocatable)"] for line in lines)
    assert lines[-1].startswith("9 scheduled, 7 unschedulable, 0 preempted in ")
    assert err == ""


def test_simulate_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(EXAMPLES / "cluster.yaml"), "-o", "json", "--explain", "--seed", "3"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) == {"pods", "nodes", "summary"}
    assert len(report["nodes"]) == 24
    first = report["pods"][0]
    assert set(first) == {"namespace", "name", "schedulerName", "result", "node", "nominatedNode", "victims",
                          "message", "filter", "scores"}


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


POD = "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec: {spec}\n"

BAD_INPUTS = [
    pytest.param(POD.format(name="bad", spec="{containers: [{name: c, resources: {requests: {cpu: abc}}}]}"),
                 "{bad}: Pod/default/bad: spec.containers[0].resources.requests.cpu: invalid quantity 'abc'",
                 id="malformed-quantity"),
    pytest.param("apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: web}\n",
                 "{bad}: CronJob/web: kind: unsupported kind 'CronJob'", id="unknown-kind"),
    pytest.param(POD.format(name="empty", spec="{containers: []}"),
                 "{bad}: Pod/default/empty: spec.containers: required", id="no-containers"),
    pytest.param("apiVersion: v1\nkind: Pod\nspec: {containers: [{name: c}]}\n",
                 "{bad}: Pod/?: metadata.name: required", id="no-name"),
    pytest.param("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n",
                 "{bad}: Node/n1: metadata.name: duplicate name (first defined in {good})", id="duplicate-node"),
    pytest.param(POD.format(name="sel", spec="{nodeSelector: [a], containers: [{name: c}]}"),
                 "{bad}: Pod/default/sel: spec.nodeSelector: must be an object", id="wrong-type"),
    pytest.param("kind: Pod\nmetadata: {name: x\n  bad: [\n",
                 "{bad}: line 3: invalid YAML: expected ',' or '}}', but got ':'", id="yaml-syntax-error"),
]


@pytest.mark.parametrize(("text", "expected"), BAD_INPUTS)
def test_simulate_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, expected: str) -> None:
    good = write(tmp_path, "good.yaml", GOOD)
    bad = write(tmp_path, "bad.yaml", text)
    assert main(["simulate", good, bad, "-o", "json"]) == 1
    out, err = capsys.readouterr()
    assert err.splitlines() == [expected.format(good=good, bad=bad)]
    pods = {p["name"]: p for p in json.loads(out)["pods"]}
    assert (pods["good"]["result"], pods["good"]["node"]) == ("Scheduled", "n1")


def test_simulate_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = write(tmp_path, "good.yaml", GOOD)
    missing = str(tmp_path / "missing.yaml")
    assert main(["simulate", good, missing]) == 1
    out, err = capsys.readouterr()
    assert err.splitlines() == [f"{missing}: cannot read: No such file or directory"]
    assert "Traceback" not in out + err
    assert out.splitlines()[1].split()[:4] == ["default/good", "default-scheduler", "Scheduled", "n1"]


@pytest.mark.parametrize("workload", ["basic", "pod-anti-affinity", "topology-spread"])
def test_bench_json(capsys: pytest.CaptureFixture[str], workload: str) -> None:
    assert main(["bench", "--workload", workload, "--nodes", "20", "--init-pods", "0", "--pods", "20",
                 "-o", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert {"podsPerSecond", "p50Ms", "p99Ms", "peakRssMiB"} <= set(result)
    assert (result["workload"], result["nodes"], result["pods"], result["scheduled"]) == (workload, 20, 20, 20)


def test_bench_basic_shape(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--nodes", "20", "--init-pods", "0", "--pods", "50", "-o", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert {"podsPerSecond", "p50Ms", "p99Ms", "peakRssMiB"} <= set(result)
    assert (result["scheduled"], result["failedAttempts"]) == (50, 0)


@pytest.mark.parametrize(("workload", "extra"), [
    pytest.param("preemption-async", ["--init-pods", "80"], id="preemption-async"),
    pytest.param("unschedulable", ["--init-pods", "40"], id="unschedulable"),
])
def test_bench_churn_workloads(capsys: pytest.CaptureFixture[str], workload: str, extra: list[str]) -> None:
    """Churn pods (preemptors, pods that fit nowhere) come in while the measured pods schedule,
    and only the measured pods count."""
    assert main(["bench", "--workload", workload, "--nodes", "20", "--pods", "30", *extra, "-o", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["nodes"], result["pods"], result["scheduled"]) == (20, 30, 30)
    assert result["churnPods"] >= 1
    assert result["p50Ms"] <= result["p90Ms"] <= result["p99Ms"]
    assert {"PreFilter", "Filter", "Score", "Bind"} <= set(result["extensionPoints"])
    assert all(point["calls"] > 0 for point in result["extensionPoints"].values())


def test_bench_workload_sizes_default_to_scheduler_perf() -> None:
    from kopfsched.bench.workloads import SIZES, WORKLOADS, preemption_async, unschedulable

    assert SIZES == {"preemption-async": (5000, 20000, 5000), "unschedulable": (5000, 20000, 10000)}
    assert set(SIZES) <= set(WORKLOADS)
    async_shape = preemption_async(2, 8, 1)
    assert [p["spec"]["nodeName"] for p in async_shape.init_pods] == ["node-0", "node-1"] * 4
    preemptor = async_shape.churn(0)["spec"]
    assert (preemptor["priority"], preemptor["containers"][0]["resources"]["requests"]["cpu"]) == (10, "3")
    stuck = unschedulable(2, 2, 1).churn(3)
    assert stuck["metadata"]["name"] == "unschedulable-3"
    assert stuck["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "9", "memory": "500Mi"}}


@pytest.mark.parametrize("argv", [
    pytest.param(["bench", "--workload", "no-such-workload"], id="unknown-workload"),
    pytest.param(["bench", "--nodes", "0"], id="no-nodes"),
])
def test_bench_usage_errors(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    assert main(argv) == 2
    assert len(capsys.readouterr().err.splitlines()) == 1


@pytest.mark.parametrize("argv", [
    pytest.param([], id="no-command"),
    pytest.param(["simulate"], id="simulate-without-files"),
    pytest.param(["simulate", "x.yaml", "-o", "yaml"], id="unknown-output"),
    pytest.param(["bench", "--pods", "many"], id="not-a-number"),
])
def test_argument_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "usage: kopfsched" in capsys.readouterr().err

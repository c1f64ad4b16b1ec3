"""The `kopfsched` command's offline subcommands through `kopfsched.cli.main`: output
formats, one clear stderr line per bad input with exit status 1, usage errors with 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kopfsched.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

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
    assert lines[-1].startswith("9 scheduled, 4 unschedulable, 3 not handled, 0 preempted in ")
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
                 "{bad}: document 1: Pod/default/bad: spec.containers[0].resources.requests.cpu: "
                 "invalid quantity 'abc'", id="malformed-quantity"),
    pytest.param(POD.format(name="empty", spec="{containers: []}"),
                 "{bad}: document 1: Pod/default/empty: spec.containers: required", id="no-containers"),
    pytest.param("apiVersion: v1\nkind: Pod\nspec: {containers: [{name: c}]}\n",
                 "{bad}: document 1: Pod/?: metadata.name: required", id="no-name"),
    pytest.param("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n",
                 "{bad}: document 1: Node/n1: metadata.name: duplicate name (first defined in {good}: document 1)",
                 id="duplicate-node"),
    pytest.param(POD.format(name="sel", spec="{nodeSelector: [a], containers: [{name: c}]}"),
                 "{bad}: document 1: Pod/default/sel: spec.nodeSelector: must be an object", id="wrong-type"),
    pytest.param("kind: Pod\nmetadata: {name: x\n  bad: [\n",
                 "{bad}: document 1: line 3, column 6: invalid YAML: did not find expected ',' or '}}'",
                 id="yaml-syntax-error"),
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


@pytest.mark.parametrize("workload", ["basic", "pod-anti-affinity", "topology-spread", "dra"])
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


@pytest.mark.parametrize("workload", ["preemption-async", "unschedulable"])
def test_bench_without_churn(capsys: pytest.CaptureFixture[str], workload: str) -> None:
    """--no-churn: the measured pods alone; no attempt fails, as none of them has to preempt."""
    assert main(["bench", "--workload", workload, "--nodes", "20", "--init-pods", "40", "--pods", "30",
                 "--no-churn", "-o", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["scheduled"], result["churnPods"], result["failedAttempts"]) == (30, 0, 0)
    assert "PostFilter" not in result["extensionPoints"]


def test_bench_workload_sizes_default_to_scheduler_perf() -> None:
    from kopfsched.bench.workloads import SIZES, WORKLOADS, preemption_async, unschedulable

    assert SIZES == {"pod-anti-affinity": (500, 100, 400),
                     "preemption-async": (5000, 20000, 5000), "unschedulable": (5000, 20000, 10000),
                     "dra": (500, 2500, 2500), "gpu-trace": (1523, 0, 8000), "gpu-trace-affinity": (1523, 0, 8000),
                     "gpu-trace-workloads": (1523, 0, 8000)}
    assert set(SIZES) <= set(WORKLOADS)
    async_shape = preemption_async(2, 8, 1)
    assert [p["spec"]["nodeName"] for p in async_shape.init_pods] == ["node-0", "node-1"] * 4
    preemptor = async_shape.churn(0)["spec"]
    assert (preemptor["priority"], preemptor["containers"][0]["resources"]["requests"]["cpu"]) == (10, "3")
    stuck = unschedulable(2, 2, 1).churn(3)
    assert stuck["metadata"]["name"] == "unschedulable-3"
    assert stuck["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "9", "memory": "500Mi"}}


@pytest.mark.parametrize("argv", [
    pytest.param([], id="no-command"),
    pytest.param(["simulate"], id="simulate-without-files"),
    pytest.param(["simulate", "x.yaml", "-o", "yaml"], id="unknown-output"),
    pytest.param(["bench", "--pods", "many"], id="not-a-number"),
    pytest.param(["bench", "--workload", "no-such-workload"], id="unknown-workload"),
    pytest.param(["bench", "--nodes", "0"], id="no-nodes"),
    pytest.param(["run", "--metrics-port", "70000"], id="not-a-port"),
    pytest.param(["sandbox", "--metrics-port", "99999"], id="sandbox-not-a-port"),
    *[pytest.param(["bench", flag, value], id=f"bench{flag}={value!r}")
      for flag in ("--nodes", "--init-pods", "--pods")
      for value in ("", " ", "1e3", "0x10", "-1", "99999999999999999999", "\x00")],
    pytest.param(["bench", "--workload", ""], id="empty-workload"),
    pytest.param(["simulate", "x.yaml", "--seed", ""], id="empty-seed"),
    pytest.param(["simulate", "x.yaml", "-o", ""], id="empty-output"),
    *[pytest.param(["explain", ref, "x.yaml"], id=f"explain-{ref!r}") for ref in ("", "a/", "a/b/c", " /")],
])
def test_argument_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: kopfsched")
    assert err.splitlines()[-1].startswith(f"kopfsched{' ' + argv[0] if argv else ''}: error: ")


# -- pods of other schedulers, --explain, profiles across files, the command's own surface ----------


def test_pods_of_other_scheduler_names_are_not_handled_not_unschedulable(capsys: pytest.CaptureFixture[str]) -> None:
    """As kube-scheduler leaves them to their scheduler: reported apart, with the name missing."""
    assert main(["simulate", str(EXAMPLES / "cluster.yaml"), "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    others = [(p["name"], p["result"], p["message"]) for p in report["pods"] if p["schedulerName"] == "bin-packing"]
    assert others == [(f"report-{i}", "NotHandled", 'no profile named "bin-packing"') for i in range(3)]
    assert {k: report["summary"][k] for k in ("scheduled", "unschedulable", "notHandled")} == {
        "scheduled": 9, "unschedulable": 4, "notHandled": 3}

    assert main(["simulate", str(EXAMPLES / "cluster.yaml")]) == 0
    table = capsys.readouterr().out
    main_table, not_handled = table.split("\n\n")[:2]
    assert "bin-packing" not in main_table
    assert not_handled.startswith("Not handled: no profile here serves these scheduler names")
    assert [line.split()[:2] for line in not_handled.splitlines()[3:]] == [
        [f"batch/report-{i}", "bin-packing"] for i in range(3)]

    assert main(["explain", "batch/report-0", str(EXAMPLES / "cluster.yaml"), "-o", "json"]) == 0
    entry = json.loads(capsys.readouterr().out)
    assert (entry["result"], entry["message"]) == ("NotHandled", 'no profile named "bin-packing"')


def test_with_the_profile_the_same_pods_are_scheduled(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(EXAMPLES / "cluster.yaml"), "--profile",
                 str(EXAMPLES / "profiles" / "bin-packing.yaml"), "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [p["result"] for p in report["pods"] if p["schedulerName"] == "bin-packing"] == ["Scheduled"] * 3
    assert report["summary"]["notHandled"] == 0


def test_a_preemptors_explanation_keeps_why_it_had_to_preempt(capsys: pytest.CaptureFixture[str]) -> None:
    """Its last attempt only saw the nominated node; the first says why every node failed."""
    assert main(["simulate", str(EXAMPLES / "affinity-and-preemption.yaml"), "-o", "json", "--explain"]) == 0
    payments = next(p for p in json.loads(capsys.readouterr().out)["pods"] if p["name"] == "payments-0")
    assert (payments["result"], payments["node"], payments["victims"]) == ("Scheduled", "node-b2",
                                                                            ["default/batch-b2"])
    assert payments["filter"] == {
        node: {"plugin": "NodeResourcesFit", "code": "Unschedulable", "reasons": ["Insufficient cpu"]}
        for node in ("node-a1", "node-a2", "node-b1", "node-b2", "node-c1", "node-c2")}


def test_explain_in_table_form(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(EXAMPLES / "affinity-and-preemption.yaml"), "--explain"]) == 0
    sections = capsys.readouterr().out.split("\n\n")
    payments = next(s for s in sections if s.startswith("default/payments-0:"))
    assert payments.splitlines()[:3] == [
        "default/payments-0: Scheduled on node-b2 after preempting default/batch-b2 "
        "(filter: its first attempt, before preempting)",
        "  FILTERED OUT  PLUGIN            CODE           REASONS",
        "  node-a1       NodeResourcesFit  Unschedulable  Insufficient cpu",
    ]
    web0 = next(s for s in sections if s.startswith("default/web-0:")).splitlines()
    assert web0[1].split()[:2] == ["SCORED", "TOTAL"]
    totals = [int(line.split()[1]) for line in web0[2:]]
    assert totals == sorted(totals, reverse=True), "best node first"
    assert web0[2].split()[0] == "node-b2", "the chosen node has the best total"


def test_duplicate_scheduler_names_name_both_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = write(tmp_path, "nodes.yaml", GOOD)
    first = write(tmp_path, "a.yaml", "apiVersion: kopfsched.dev/v1alpha1\nkind: SchedulerProfile\n"
                                      "metadata: {name: a}\nspec: {schedulerName: same}\n")
    second = write(tmp_path, "b.yaml", "---\napiVersion: kopfsched.dev/v1alpha1\nkind: SchedulerProfile\n"
                                       "metadata: {name: b}\nspec: {schedulerName: same}\n")
    expected = (f'{second}: document 1: SchedulerProfile/b: spec.schedulerName: scheduler name "same" is also '
                f"used by SchedulerProfile/a ({first}: document 1)")
    assert main(["simulate", nodes, "--profile", first, "--profile", second]) == 1
    assert capsys.readouterr().err.splitlines() == [expected]
    assert main(["validate", first, second]) == 1
    assert capsys.readouterr().err.splitlines() == [expected]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    import tomllib

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    pyproject = tomllib.loads((EXAMPLES.parent / "pyproject.toml").read_text())
    assert (exc.value.code, capsys.readouterr().out) == (0, f"kopfsched {pyproject['project']['version']}\n")


def test_every_flag_has_help_with_its_default() -> None:
    import argparse

    from kopfsched.bench.workloads import WORKLOADS
    from kopfsched.cli import _parser

    parser = _parser()
    [subparsers] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name, sub in subparsers.choices.items():
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help, f"{name} {action.dest}: no help"
            if action.option_strings:
                assert "default" in action.help, f"{name} {action.option_strings[0]}: default not stated"
    workload = next(a for a in subparsers.choices["bench"]._actions if a.dest == "workload")
    assert all(w in workload.help for w in WORKLOADS)
    assert "bench" in parser.format_help() and "--version" in parser.format_help()


def test_feature_gates_switch_pop_from_backoff_and_refuse_unknown_gates(capsys: pytest.CaptureFixture[str]) -> None:
    from kopfsched import features

    saved = features.GATES
    try:
        assert main(["bench", "--workload", "preemption", "--nodes", "20", "--init-pods", "80", "--pods", "10",
                     "--feature-gates", "SchedulerPopFromBackoffQ=false", "-o", "json"]) == 0
        assert not features.enabled(features.POP_FROM_BACKOFF_Q)
        assert json.loads(capsys.readouterr().out)["scheduled"] == 10
    finally:
        features.set_gates(saved)
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "x.yaml", "--feature-gates", "SchedulerPopFromBackoffQ=yes"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "kopfsched simulate: error: argument --feature-gates: invalid feature gate "
        "'SchedulerPopFromBackoffQ=yes': expected Name=true or Name=false")


def test_every_help_shows_each_flag_with_its_actual_default(capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """`kopfsched COMMAND --help` as printed: every flag is listed, and the default its help
    states is the one argparse really uses (a changed default cannot leave the help behind)."""
    import argparse

    from kopfsched.cli import _parser

    monkeypatch.setenv("COLUMNS", "2000")  # no line wrapping at hyphens
    parser = _parser()
    [subparsers] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name, sub in subparsers.choices.items():
        with pytest.raises(SystemExit) as exc:
            main([name, "--help"])
        printed = " ".join(capsys.readouterr().out.split())
        assert exc.value.code == 0
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            help_text = " ".join(sub._get_formatter()._expand_help(action).split())
            assert help_text in printed, f"{name} {action.dest}: help not printed"
            for option in action.option_strings:
                assert option in printed, f"{name} {option}: not listed"
            default = action.default
            if isinstance(default, bool):
                stated = "default: off" if default is False else "default: on"
                assert stated in help_text, f"{name} {action.option_strings}: {help_text!r}"
            elif isinstance(default, (int, str)):
                assert f"default: {default}" in help_text, f"{name} {action.option_strings}: {help_text!r}"


def test_validate_counts_the_files_of_a_directory(capsys: pytest.CaptureFixture[str]) -> None:
    profiles = sorted((EXAMPLES / "profiles").glob("*.yaml"))
    assert len(profiles) > 1
    assert main(["validate", str(EXAMPLES / "profiles")]) == 0
    assert capsys.readouterr().out == f"{len(profiles)} file(s) valid\n"


def test_bench_table_shows_the_extension_points_as_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    """Not a Python dict's repr: one row per extension point, the costliest first."""
    assert main(["bench", "--nodes", "10", "--init-pods", "0", "--pods", "20"]) == 0
    out = capsys.readouterr().out
    head, points = out.split("\nextensionPoints:\n")
    assert "{" not in out
    assert head.splitlines()[0].split() == ["workload:", "basic"]
    rows = [line.split() for line in points.splitlines()]
    assert rows[0] == ["POINT", "CALLS", "TOTAL", "MS", "MEAN", "US"]
    assert {"PreFilter", "Filter", "Score", "Bind"} <= {row[0] for row in rows[1:]}
    assert all(row[1] == "20" for row in rows[1:] if row[0] in ("Filter", "Bind"))
    totals = [float(row[2]) for row in rows[1:]]
    assert totals == sorted(totals, reverse=True)


def test_every_subcommand_help_describes_it_and_points_at_its_docs() -> None:
    import argparse
    import re

    from kopfsched.cli import _parser

    parser = _parser()
    [subparsers] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    root = EXAMPLES.parent
    for name, sub in subparsers.choices.items():
        assert sub.description, name
        for page in re.findall(r"docs/[\w-]+\.md", sub.description):
            assert (root / page).is_file(), f"{name}: {page}"

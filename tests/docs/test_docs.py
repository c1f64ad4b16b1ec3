"""The documentation users get is in the repository: no file points at a design document
that is not shipped, and every relative link in the README and docs/ resolves."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md")),
        *sorted(ROOT.glob("examples/**/*.md"))]


def tracked_text_files() -> list[Path]:
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / n for n in names.splitlines() if not n.endswith((".png", ".jpg", ".whl"))]


def test_nothing_points_at_an_unshipped_design_document() -> None:
    offenders = []
    for path in tracked_text_files():
        if path == Path(__file__) or not path.is_file():
            continue
        text = path.read_text(errors="replace")
        if re.search(r"\bDESIGN\b|\.\./shared/|/work/shared", text):
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_relative_links_resolve(doc: Path) -> None:
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text())
    missing = [link for link in links if "://" not in link and not (doc.parent / link).exists()]
    assert missing == []


# -- every command the README and docs/ show --------------------------------------------------

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.DOTALL | re.MULTILINE)
PROGRAMS = ("kopfsched", "kubectl", "pip", "python", "docker", "curl", "export", "PYTHONPATH=", "cd")
OFFLINE = ("simulate", "explain", "validate", "plan", "replay")
"""kopfsched subcommands that need no cluster: their commands in the docs are run here."""

ELSEWHERE = {
    # a command (regex, whole command) → the test that runs it, as "file::test"
    r"pip install (-e )?(\.|'\.\[test\]')": "tests/outoftree/test_writing_plugins_guide.py::"
                                             "test_a_reader_installs_the_plugin_and_uses_it",
    r"python -m pytest( [\w/.:-]+)*|pytest": "tests/docs/test_docs.py::test_every_documented_command_is_run_somewhere",
    r"kopfsched bench .*": "tests/cli/test_cli.py::test_bench_json",
    r"(PYTHONPATH=operator )?python -m benchmarks\.preemption_outcomes .*":
        "tests/scheduler/test_preemption_bench_outcomes.py::test_preemption_bench_outcomes_unchanged",
    r"python -m benchmarks\.differential_scan .*":
        "tests/differential/test_scan.py::test_the_scan_compares_every_seeds_pods_and_finds_no_difference",
    r"python -m benchmarks\.e2e_throughput .*":
        "tests/benchmarks/test_throughput_scripts.py::test_the_script_runs_small_and_reports_every_figure",
    r"kopfsched sandbox|export KUBECONFIG=(~/\.kube/)?kopfsched-sandbox\.kubeconfig|"
    r"kubectl (--kubeconfig (~/\.kube/)?kopfsched-sandbox\.kubeconfig )?(get|describe|apply) .*":
        "tests/sandbox/test_sandbox_docs.py::test_the_readme_and_sandbox_doc_commands_run_as_shown",
    r"kubectl apply -f crds/ -f manifests/": "tests/e2e/test_operator_scheduling.py::"
                                            "test_whole_install_in_one_apply_then_the_default_profile_serves",
    r"kubectl -n kopfsched-system set image .*": "tests/manifests/test_manifests.py::"
                                                 "test_the_documented_image_overrides_work",
    r"kopfsched snapshot -o cluster\.yaml|kopfsched (simulate|explain shop/web-7d4b9) cluster\.yaml":
        "tests/e2e/test_snapshot_explain.py::test_snapshot_round_trips_into_simulate_with_the_operators_reasons",
    r"kubectl -n kopfsched-system port-forward deploy/kopfsched .*|curl -s http://127\.0\.0\.1:\d+/debug/pending .*":
        "tests/e2e/test_operator_dashboard.py::"
        "test_debug_pending_reports_the_last_attempt_and_forgets_bound_and_deleted_pods",
    r"python -m benchmarks\.rss_benchmark( --[\w-]+( \d+)?)*": "tests/benchmarks/test_throughput_scripts.py::"
                                                                "test_the_rss_benchmark_runs_as_documented",
    r"PYTHONPATH=operator python -m benchmarks\.dashboard_cost":
        "tests/docs/test_docs.py::test_the_dashboard_cost_script_runs_as_documented",
    r"pip install (-e )?\./examples/qos-sort-plugin|cd examples/qos-sort-plugin|"
    r"kopfsched (validate|simulate) examples/qos-sort-plugin/.*":
        "tests/outoftree/test_qos_sort_example.py::test_simulate_orders_equal_priority_pods_by_qos",
    r"kopfsched plan examples/cluster\.yaml --node-template examples/node-templates\.yaml --apply-to planned\.yaml|"
    r"kopfsched (simulate|explain ml/train-giant-0) planned\.yaml":
        "tests/simulate/test_plan.py::test_apply_to_as_documented",
    r"kopfsched (validate tiered\.yaml|simulate snapshot\.yaml --profile tiered\.yaml --explain)":
        "tests/outoftree/test_writing_plugins_guide.py::test_a_reader_installs_the_plugin_and_uses_it",
}


NOT_RUN = {
    # a command (regex, whole command) → why no test runs it, and what checks it instead
    r"docker build -t \S+ \.": "needs a container daemon; test_manifests lints the Dockerfile with hadolint and "
                               "checks this tag against the README's overlay",
    r"docker push \S+": "writes to a registry; test_the_image_pushed_is_the_image_built checks its tag",
}
"""Commands the docs show that no test runs: they are never counted as run."""


def documented_commands() -> list[tuple[str, str, str | None]]:
    """(where, command, the output shown under it or None) for every command in a code block:
    every line of a `sh`/`shell` block, and the `$ ` lines of the others (output follows)."""
    found = []
    for doc in DOCS:
        text = doc.read_text()
        for match in FENCE.finditer(text):
            lang, body = match.groups()
            where = f"{doc.relative_to(ROOT)}:{text[:match.start()].count(chr(10)) + 1}"
            lines = body.splitlines()
            if any(line.startswith("$ ") for line in lines):
                starts = [i for i, line in enumerate(lines) if line.startswith("$ ")]
                for i, start in enumerate(starts):
                    end = starts[i + 1] if i + 1 < len(starts) else len(lines)
                    shown = "\n".join(lines[start + 1:end]).strip("\n")
                    found.append((where, lines[start][2:], shown or None))
            elif lang in ("sh", "shell", "") and lines and lines[0].startswith(PROGRAMS):
                for line in lines:
                    command = line.split(" #", 1)[0].strip()
                    if command and not command.startswith("#"):
                        found.append((where, command, None))
    return [(where, part.strip(), shown) for where, command, shown in found for part in command.split(" && ")]


def is_synopsis(command: str) -> bool:
    """`kopfsched simulate FILE... [--profile F]...`: the form of a command, not one to run."""
    return command.startswith("kopfsched ") and ("[" in command or "..." in command)


def runs_here(command: str) -> bool:
    """An offline kopfsched command on the repository's own files, run by no other test."""
    argv = shlex.split(command)
    return (argv[:1] == ["kopfsched"] and argv[1] in OFFLINE and not any(re.fullmatch(p, command) for p in ELSEWHERE)
            and all((ROOT / arg).is_file() for arg in argv[2:] if arg.endswith((".yaml", ".yml", ".json"))))


def test_every_documented_command_is_run_somewhere() -> None:
    """Each command is run below, or by the named test; a new command in the docs must be
    added to one or the other, and an entry no command needs any more is an error too."""
    unaccounted, used = [], set()
    for where, command, _ in documented_commands():
        if is_synopsis(command) or runs_here(command) or any(re.fullmatch(p, command) for p in NOT_RUN):
            continue
        patterns = [p for p in ELSEWHERE if re.fullmatch(p, command)]
        used.update(patterns)
        if not patterns:
            unaccounted.append(f"{where}: {command}")
    assert unaccounted == []
    assert set(ELSEWHERE) - used == set(), "entries no documented command matches"
    for test in set(ELSEWHERE.values()):
        path, name = test.split("::")
        assert re.search(rf"^(async )?def {name}\(", (ROOT / path).read_text(), re.MULTILINE), test


def test_every_documented_kopfsched_command_parses() -> None:
    """A command the docs show but no test here runs (`kopfsched bench ...`, `sandbox`, ...) at
    least takes the subcommand and flags it is shown with."""
    from kopfsched.cli import _parser

    parser, wrong = _parser(), []
    for where, command, _ in documented_commands():
        if command.startswith("kopfsched ") and not is_synopsis(command):
            try:
                parser.parse_args(shlex.split(command)[1:])
            except SystemExit:
                wrong.append(f"{where}: {command}")
    assert wrong == []


def test_every_script_the_docs_name_exists() -> None:
    """`python -m tests.x.y` in a code block or the prose names a module that is there (the
    benchmark scripts are named in docs/performance.md and CONTRIBUTING.md)."""
    named = {(doc.name, module) for doc in DOCS
             for module in re.findall(r"python -m ((?:tests|benchmarks)(?:\.\w+)+)", doc.read_text())}
    assert named
    missing = [(doc, module) for doc, module in sorted(named)
               if not (ROOT / (module.replace(".", "/") + ".py")).is_file()]
    assert missing == []


def test_the_pre_commit_hooks_are_the_documented_local_checks() -> None:
    """.pre-commit-config.yaml runs CONTRIBUTING.md's lint block and the documentation tests,
    every hook local with the environment's tools (nothing fetched when they run)."""
    import yaml

    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    assert [repo["repo"] for repo in config["repos"]] == ["local"]
    hooks = config["repos"][0]["hooks"]
    assert {hook["language"] for hook in hooks} == {"system"}
    entries = [hook["entry"] for hook in hooks]
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    [lint] = [body for lang, body in FENCE.findall(contributing) if body.startswith("ruff check")]
    lint_commands = [line.split(" #", 1)[0].strip() for line in lint.splitlines()]
    assert lint_commands == ["ruff check operator tests", "lint-imports", "mypy"]
    assert entries[:3] == ["ruff check", "lint-imports", "mypy"]  # ruff is handed the changed files
    for entry in entries[3:]:
        argv = entry.split()
        assert argv[:3] == ["python", "-m", "pytest"], entry
        assert all((ROOT / arg).is_file() for arg in argv if arg.startswith("tests/")), entry
    assert {"tests/docs/test_docs.py", "tests/docs/test_architecture_table.py"} <= {
        arg for entry in entries for arg in entry.split() if arg.startswith("tests/")}


def test_the_commands_not_run_are_only_the_image_build_and_push() -> None:
    """What is not run is named, and nothing else hides among it: each NOT_RUN entry matches a
    documented command, and only the docker commands are there."""
    not_run = [command for _, command, _ in documented_commands()
               if any(re.fullmatch(p, command) for p in NOT_RUN)]
    assert {p for p in NOT_RUN if any(re.fullmatch(p, c) for c in not_run)} == set(NOT_RUN)
    assert all(command.startswith("docker ") for command in not_run), not_run


def test_the_image_pushed_is_the_image_built() -> None:
    commands = [command for _, command, _ in documented_commands()]
    built = {m.group(1) for c in commands if (m := re.fullmatch(r"docker build -t (\S+) \.", c))}
    pushed = {m.group(1) for c in commands if (m := re.fullmatch(r"docker push (\S+)", c))}
    assert built and pushed == built


def test_every_synopsis_names_real_flags() -> None:
    from kopfsched.cli import _parser

    parser = _parser()
    [subparsers] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    synopses = [(where, command) for where, command, _ in documented_commands() if is_synopsis(command)]
    assert synopses
    for where, command in synopses:
        name = command.split()[1]
        flags = {option for action in subparsers.choices[name]._actions for option in action.option_strings}
        for flag in re.findall(r"(?<![\w-])--?[a-z][\w-]*", command):
            assert flag.split("/")[0] in flags, f"{where}: {flag} is not a flag of kopfsched {name}"


OFFLINE_COMMANDS = [(where, command, shown) for where, command, shown in documented_commands()
                    if not is_synopsis(command) and runs_here(command)]


@pytest.mark.parametrize(("where", "command", "shown"), OFFLINE_COMMANDS,
                         ids=[f"{w} {c}" for w, c, _ in OFFLINE_COMMANDS])
def test_documented_offline_command_runs_as_shown(monkeypatch, capsys, where, command, shown) -> None:
    """Run from the repository's top, as the docs do; the output shown is the output."""
    from kopfsched.cli import main

    monkeypatch.chdir(ROOT)
    assert main(shlex.split(command)[1:]) == 0, capsys.readouterr().err
    out, err = capsys.readouterr()
    assert err == ""
    if shown is not None:
        assert out.rstrip("\n") == shown, f"{where}: the output shown is not the output"


@pytest.mark.timeout(600)  # its subprocess is bounded at 300 s
def test_the_dashboard_cost_script_runs_as_documented(tmp_path) -> None:
    """docs/dashboard.md's measurement, as written but on a small cluster (the full size is a
    benchmark, not a test)."""
    done = subprocess.run([sys.executable, "-m", "benchmarks.dashboard_cost", "--nodes", "50", "--pods", "100",
                           "--pending", "50"], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "operator")},
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith("50 nodes, 100 bound pods, 50 pending pods")
    assert "/debug/overview: median " in done.stdout and "/debug/pending:  median " in done.stdout


def test_the_quick_start_says_what_its_run_shows(monkeypatch, capsys) -> None:
    """The README's words about `kopfsched simulate examples/cluster.yaml` match the run: a
    newcomer must not meet an unexplained failure in the first output they see."""
    import json

    from kopfsched.cli import main

    readme = " ".join((ROOT / "README.md").read_text().split())
    monkeypatch.chdir(ROOT)
    assert main(["simulate", "examples/cluster.yaml", "-o", "json"]) == 0
    pods = json.loads(capsys.readouterr().out)["pods"]
    by_result: dict[str, list[str]] = {}
    for pod in pods:
        by_result.setdefault(pod["result"], []).append(f"{pod['namespace']}/{pod['name']}")
    numbers = {1: "One", 2: "Two", 3: "Three", 4: "Four", 5: "Five"}
    assert f"{numbers[len(by_result['Unschedulable'])]} pods cannot fit anywhere" in readme
    assert by_result["Gated"] == ["batch/quota-job-0"] and "`quota-job-0` waits behind a scheduling gate" in readme
    assert by_result["NotHandled"] == [f"batch/report-{i}" for i in range(3)]
    assert "The three `batch/report-*` pods ask for a scheduler named `bin-packing`" in readme
    assert set(by_result) == {"Scheduled", "Unschedulable", "Gated", "NotHandled"}


def test_the_docs_name_the_metrics_port_the_operator_uses() -> None:
    """The metrics port moved off kube-scheduler's secure 10259; every port the docs give for
    the dashboard, the metrics or a port-forward is the one `kopfsched run` serves on, and
    10259 appears only where the docs say it is kube-scheduler's secure port, not ours."""
    from kopfsched.cli import _parser

    parser = _parser()
    [subparsers] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    [port] = [a.default for a in subparsers.choices["run"]._actions if a.dest == "metrics_port"]
    manifest = (ROOT / "manifests" / "05-deployment.yaml").read_text()
    assert f'"--metrics-port", "{port}"' in manifest
    for doc in DOCS:
        text = doc.read_text()
        given = re.findall(r"port-forward \S+ (\d+):(\d+)|127\.0\.0\.1:(\d+)"
                           r"|metrics port \((?:`--metrics-port`, )?(\d+)|default `kopfsched run`'s, (\d+)", text)
        assert {int(n) for groups in given for n in groups if n} <= {port}, doc
        for line in (line for line in text.splitlines() if "10259" in line):
            assert "secure" in line or "kube-scheduler's 10259" in line, f"{doc.name}: {line}"


# -- the problem lines the docs show are the lines the commands print --------------------------

_NODE = ("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
         "status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}\n")
_PROFILE = ("apiVersion: kopfsched.dev/v1alpha1\nkind: SchedulerProfile\nmetadata: {{name: {}}}\n"
            "spec: {{schedulerName: same}}\n")
_CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c%d}\n"
_KUBECONFIG = ("clusters: [{name: c, cluster: {server: %s}}]\ncontexts: [{name: x, context: {cluster: c}}]\n"
               "current-context: %s\n")
_BOMB = "".join(f"{chr(97 + i)}: &{chr(97 + i)} [{', '.join([f'*{chr(96 + i)}'] * 10 if i else ['x'] * 10)}]\n"
                for i in range(7))

EXAMPLE_LINES = {
    # the line shown → (the files it is printed for, the command)
    "cluster.yaml: document 3: Pod/default/web-1: spec.containers[0].resources.requests.cpu: invalid quantity 'abc'": (
        {"cluster.yaml": "---\n".join([_NODE, _NODE.replace("n1", "n2"), "apiVersion: v1\nkind: Pod\nmetadata: {name: "
                                       "web-1, namespace: default}\nspec: {containers: [{name: c, image: x, resources: "
                                       "{requests: {cpu: abc}}}]}\n"])}, ["simulate", "cluster.yaml"]),
    "cluster.yaml: document 7: Node/n1: metadata.name: duplicate name (first defined in nodes.yaml: document 1)": (
        {"nodes.yaml": _NODE, "cluster.yaml": "---\n".join([_NODE.replace("n1", f"m{i}") for i in range(6)] + [_NODE])},
        ["simulate", "nodes.yaml", "cluster.yaml"]),
    "cluster.yaml: document 2: line 14, column 3: invalid YAML: did not find expected key": (
        {"cluster.yaml": "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n---\napiVersion: v1\nkind: Pod\nmetadata:\n"
                         "  name: web-1\n  namespace: default\nspec:\n  containers:\n  - {name: c, image: x}\n"
                         "  priority: 0\n  - oops\n"}, ["simulate", "cluster.yaml"]),
    'b.yaml: document 1: SchedulerProfile/b: spec.schedulerName: scheduler name "same" is also used by '
    "SchedulerProfile/a (a.yaml: document 1)": (
        {"a.yaml": _PROFILE.format("a"), "b.yaml": _PROFILE.format("b")}, ["validate", "a.yaml", "b.yaml"]),
    "empty.yaml: no objects (the input is empty)": ({"empty.yaml": ""}, ["validate", "empty.yaml"]),
    "image.png: binary data, not YAML or JSON": (
        {"image.png": b"\x89PNG\r\n\x1a\n\x00\x00"}, ["validate", "image.png"]),
    "notes.yaml: line 2: not UTF-8 text (byte 0xe9 at offset 43)": (
        {"notes.yaml": b"kind: SchedulerProfile\nmetadata: {name: caf\xe9}\n"}, ["validate", "notes.yaml"]),
    "bomb.yaml: document 1: invalid YAML: aliases expand to more than 100000 values (an alias bomb?)": (
        {"bomb.yaml": _BOMB}, ["validate", "bomb.yaml"]),
    "warning: skipped 12 objects of kinds the scheduler does not read: ConfigMap (9), Secret (3)": (
        {"export.yaml": "---\n".join([_NODE, *[_CONFIGMAP % i for i in range(9)],
                                      *[(_CONFIGMAP % i).replace("ConfigMap", "Secret") for i in range(3)]])},
        ["simulate", "export.yaml"]),
    'kubeconfig: document 1: Config: current-context: no context named "prod" in contexts': (
        {"kubeconfig": _KUBECONFIG % ("http://127.0.0.1:1", "prod")}, ["snapshot", "--kubeconfig", "kubeconfig"]),
    "kubeconfig: document 1: Config: clusters[0].cluster.server: must be a string, got integer": (
        {"kubeconfig": _KUBECONFIG % ("5", "x")}, ["snapshot", "--kubeconfig", "kubeconfig"]),
}


def shown_problem_lines() -> list[str]:
    """The example lines of docs/cli.md's blocks (the one page that shows them)."""
    text = (ROOT / "docs" / "cli.md").read_text()
    return [line for lang, body in FENCE.findall(text) if lang == "" for line in body.splitlines()
            if re.match(r"[\w.-]+: |warning: ", line) and not line.startswith("FILE: ")]


def test_every_problem_line_shown_has_its_input_here() -> None:
    assert sorted(set(shown_problem_lines())) == sorted(EXAMPLE_LINES)


@pytest.mark.parametrize("line", list(EXAMPLE_LINES))
def test_a_problem_line_the_docs_show_is_printed(tmp_path, monkeypatch, capsys, line) -> None:
    from kopfsched.cli import main

    files, argv = EXAMPLE_LINES[line]
    for name, content in files.items():
        (tmp_path / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    monkeypatch.chdir(tmp_path)
    for variable in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST"):
        monkeypatch.delenv(variable, raising=False)
    main(argv)
    assert line in capsys.readouterr().err.splitlines()


def test_the_json_example_is_the_real_output(monkeypatch, capsys) -> None:
    """docs/simulate-json.md's example, field by field, against the run it says it is from."""
    import json

    from kopfsched.cli import main

    text = (ROOT / "docs" / "simulate-json.md").read_text()
    [example] = [json.loads(body) for lang, body in FENCE.findall(text) if lang == "json"]
    assert "`kopfsched simulate examples/cluster.yaml --explain -o json`" in " ".join(text.split())
    monkeypatch.chdir(ROOT)
    assert main(["simulate", "examples/cluster.yaml", "--explain", "-o", "json"]) == 0
    real = json.loads(capsys.readouterr().out)
    [shown_pod], [shown_node] = example["pods"], example["nodes"]
    pod = next(p for p in real["pods"] if (p["namespace"], p["name"]) == (shown_pod["namespace"], shown_pod["name"]))
    assert list(shown_pod) == list(pod), "the same fields, in the same order"
    partial = ("filter", "scores")  # one node of each shown
    assert {k: v for k, v in shown_pod.items() if k not in partial} == {
        k: v for k, v in pod.items() if k not in partial}
    for key in partial:
        assert shown_pod[key].items() <= pod[key].items(), key
    assert shown_node == next(n for n in real["nodes"] if n["name"] == shown_node["name"])
    assert list(example["summary"]) == list(real["summary"])
    assert {k: v for k, v in example["summary"].items() if k != "seconds"} == {
        k: v for k, v in real["summary"].items() if k != "seconds"}
    table_fields = set(re.findall(r"^\| `([^|]+)` \|", text, re.MULTILINE))
    documented = {name.strip("` ") for row in table_fields for name in row.split(",")}
    assert set(pod) | set(real["summary"]) <= documented


def test_the_explain_json_example_is_the_real_output(monkeypatch, capsys) -> None:
    """docs/explain.md's shortened example ("..." marks what is left out) against the command it names."""
    import json

    from kopfsched.cli import main

    text = (ROOT / "docs" / "explain.md").read_text()
    [example] = [json.loads(body) for lang, body in FENCE.findall(text) if lang == "json"]
    command = "kopfsched explain default/payments-0 examples/affinity-and-preemption.yaml -o json"
    assert f"(`{command}`, shortened.)" in text
    monkeypatch.chdir(ROOT)
    assert main(shlex.split(command)[1:]) == 0
    real = json.loads(capsys.readouterr().out)
    assert list(example) == list(real), "the same fields, in the same order"
    for key, shown in example.items():
        if isinstance(shown, dict) and shown.items() and key != "preemption":
            assert {k: v for k, v in shown.items() if k != "..."}.items() <= real[key].items(), key
        elif key != "preemption":
            assert shown == real[key], key
    assert list(example["preemption"]) == list(real["preemption"])
    preemption = {k: v for k, v in example["preemption"].items() if k not in ("candidates", "nodes")}
    assert preemption.items() <= real["preemption"].items()
    assert example["preemption"]["candidates"][0] == real["preemption"]["candidates"][0]


def test_every_inline_command_names_a_real_subcommand_and_flags() -> None:
    """`kopfsched ...` in the prose (outside code blocks): the subcommand exists, every flag is
    one of its flags, and every --workload and -o value is one it takes."""
    from kopfsched.cli import _parser

    parser = _parser()
    [subparsers] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    top = {option for action in parser._actions for option in action.option_strings}
    seen = 0
    for doc in DOCS:
        prose = " ".join(FENCE.sub("", doc.read_text()).split())
        for span in re.findall(r"`(kopfsched [^`]+)`", prose):
            words = span.replace("\\|", "|").split()
            name = words[1]
            if name in top or name.rstrip(":") == "COMMAND":
                continue
            assert name in subparsers.choices, f"{doc.name}: {span}"
            actions = {option: action for action in subparsers.choices[name]._actions
                       for option in action.option_strings}
            for i, word in enumerate(words):
                flag = word.strip("[]").split("/")[0]
                if flag.startswith("-") and flag not in ("-", "--"):
                    assert flag in actions, f"{doc.name}: {span}: {flag}"
                    choices = actions[flag].choices
                    value = words[i + 1].strip("[]") if i + 1 < len(words) else ""
                    if choices and value and not value.isupper():  # NAME, F: placeholders
                        assert set(value.split("|")) <= set(choices), f"{doc.name}: {span}: {flag} {value}"
            seen += 1
    assert seen > 50

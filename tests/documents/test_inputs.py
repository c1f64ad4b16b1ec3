"""What every offline input path does with what a user feeds it: files, directories, stdin,
kubectl exports, and malformed, empty, binary, huge and hostile input. Each problem is one
line naming the file, the document and the object, the exit status is 1, and the same input
gives the same line in every subcommand that reads it."""

from __future__ import annotations

import gc
import io
import json
import re
import sys
from pathlib import Path

import pytest

from kopfsched import gcpolicy
from kopfsched.cli import main
from kopfsched.documents import Progress, libyaml, paths, read_documents
from tests.fakes import FakeClock

NODE = """\
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
"""
POD = """\
apiVersion: v1
kind: Pod
metadata: {name: p1, namespace: default}
spec: {containers: [{name: c, image: x, resources: {requests: {cpu: 100m}}}]}
"""
PROFILE = """\
apiVersion: kopfsched.dev/v1alpha1
kind: SchedulerProfile
metadata: {name: packing}
"""
KSC = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
BOMB = "".join(f"{chr(97 + i)}: &{chr(97 + i)} [{', '.join([f'*{chr(96 + i)}'] * 10 if i else ['x'] * 10)}]\n"
               for i in range(7))

# (id, content, the one expected line with {f} for the file)
HOSTILE = [
    ("empty", b"", "{f}: no objects (the input is empty)"),
    ("only-comments", b"# nothing here\n---\n---\n", "{f}: no objects (the input is empty)"),
    ("binary", b"\x7fELF\x02\x01\x01\x00\x00\x00", "{f}: binary data, not YAML or JSON"),
    ("not-utf8", b"kind: SchedulerProfile\nmetadata: {name: caf\xe9}\n",
     "{f}: line 2: not UTF-8 text (byte 0xe9 at offset 43)"),
    ("yaml-syntax", b"kind: SchedulerProfile\nspec: [unclosed\n",
     "{f}: document 1: line 3, column 1: invalid YAML: did not find expected ',' or ']'"),
    ("alias-bomb", BOMB.encode(),
     "{f}: document 1: invalid YAML: aliases expand to more than 100000 values (an alias bomb?)"),
    ("recursive-alias", b"a: &a [*a]\n", "{f}: document 1: line 1: invalid YAML: an alias refers to itself"),
    ("deep-flow", b"[" * 200_000, "{f}: document 1: nested too deeply"),
    ("deep-block", b"- " * 200_000 + b"x\n", "{f}: document 1: nested too deeply"),
    ("python-tag", b"kind: !!python/object/apply:os.system [ls]\n",
     "{f}: document 1: line 1, column 7: invalid YAML: could not determine a constructor for the tag "
     "'tag:yaml.org,2002:python/object/apply:os.system'"),
    ("list-document", b"- a\n- b\n", "{f}: document 1: must be an object, got array"),
    ("scalar-document", b"just text\n", "{f}: document 1: must be an object, got string"),
    ("list-items-not-a-list", b"kind: List\nitems: {a: 1}\n", "{f}: document 1: List: items: must be an array, "
                                                                "got object"),
    ("no-kind", b"metadata: {name: x}\n", "{f}: document 1: ?/x: kind: required"),
    ("mapping-key", b"? [a]\n: b\n", "{f}: document 1: line 1: invalid YAML: a key must be a scalar, got array"),
]


def write(tmp_path: Path, name: str, content: bytes | str) -> str:
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return str(path)


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def subcommands(tmp_path: Path, bad: str) -> dict[str, list[str]]:
    nodes = write(tmp_path, "nodes.yaml", NODE)
    cluster = write(tmp_path, "cluster.yaml", NODE + "---\n" + POD)
    return {
        "simulate": ["simulate", nodes, bad],
        "simulate --profile": ["simulate", nodes, "--profile", bad],
        "validate": ["validate", bad],
        "bench --profile": ["bench", "--nodes", "2", "--init-pods", "0", "--pods", "1", "--profile", bad],
        "run --config": ["run", "--config", bad],
        "explain": ["explain", "default/p1", cluster, bad],
        "explain --profile": ["explain", "default/p1", cluster, "--profile", bad],
        "simulate --compare": ["simulate", nodes, "--compare", bad],
        "sandbox": ["sandbox", bad],
    }


@pytest.mark.parametrize("command", ["simulate", "simulate --profile", "validate", "bench --profile", "run --config",
                                     "explain", "explain --profile", "simulate --compare", "sandbox"])
@pytest.mark.parametrize(("content", "expected"), [pytest.param(c, e, id=i) for i, c, e in HOSTILE])
def test_hostile_input_is_one_line_and_exit_1_everywhere(tmp_path, capsys, command, content, expected):
    bad = write(tmp_path, "bad.yaml", content)
    code, out, err = run(capsys, subcommands(tmp_path, bad)[command])
    assert code == 1
    assert err.splitlines() == [expected.format(f=bad)]
    assert "Traceback" not in out + err


def test_a_file_over_the_input_limit_is_refused_unread(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(paths, "MAX_INPUT_BYTES", 1000)
    big = write(tmp_path, "big.yaml", NODE + "#" * 2000 + "\n")
    code, _, err = run(capsys, ["simulate", big])
    assert (code, err.splitlines()) == (1, [f"{big}: larger than 1000 bytes, the input limit"])


def test_huge_stdin_is_refused(capsys, monkeypatch):
    monkeypatch.setattr(paths, "MAX_INPUT_BYTES", 1000)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"#" * 5000)))
    code, _, err = run(capsys, ["validate", "-"])
    assert (code, err.splitlines()) == (1, ["<stdin>: larger than 1000 bytes, the input limit"])


def padded_to(size: int) -> bytes:
    """A valid node document of exactly `size` bytes (a comment line fills it up)."""
    head = NODE.encode()
    return head + b"#" * (size - len(head) - 1) + b"\n"


@pytest.mark.parametrize(("size", "refused"), [(1000, False), (1001, True)], ids=["at-the-limit", "one-byte-over"])
@pytest.mark.parametrize("source", ["file", "stdin"])
def test_the_input_limit_is_inclusive(tmp_path, capsys, monkeypatch, source, size, refused):
    """An input of exactly MAX_INPUT_BYTES is read; one byte more is refused."""
    monkeypatch.setattr(paths, "MAX_INPUT_BYTES", 1000)
    data = padded_to(size)
    assert len(data) == size
    if source == "file":
        name = path = write(tmp_path, "node.yaml", data)
    else:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
        name, path = "<stdin>", "-"
    code, _, err = run(capsys, ["simulate", path, "-o", "json"])
    if refused:
        assert (code, err.splitlines()) == (1, [f"{name}: larger than 1000 bytes, the input limit"])
    else:
        assert (code, err) == (0, "")


def test_a_missing_file_and_an_empty_directory(tmp_path, capsys):
    missing, empty = str(tmp_path / "missing.yaml"), tmp_path / "empty"
    empty.mkdir()
    code, _, err = run(capsys, ["simulate", missing, str(empty)])
    assert (code, err.splitlines()) == (1, [f"{missing}: cannot read: No such file or directory",
                                            f"{empty}: no .yaml, .yml or .json files in the directory"])


# -- what a user feeds it ------------------------------------------------------------------


def test_stdin(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO((NODE + "---\n" + POD).encode())))
    code, out, err = run(capsys, ["simulate", "-", "-o", "json"])
    assert (code, err) == (0, "")
    [pod] = json.loads(out)["pods"]
    assert (pod["name"], pod["result"], pod["node"]) == ("p1", "Scheduled", "n1")


@pytest.mark.parametrize("argv", [
    ["simulate", "-", "--profile", "-"], ["simulate", "-", "--compare", "-"],
    ["explain", "default/p1", "-", "--profile", "-"],
    ["simulate", "x.yaml", "--profile", "-", "--profile", "-"], ["validate", "-", "-"],
], ids=str)
def test_stdin_given_to_two_options_is_one_problem(capsys, monkeypatch, argv):
    """Not a second reader finding the stream empty ("no objects"): the same line everywhere."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO((NODE + "---\n" + POD).encode())))
    code, out, err = run(capsys, argv)
    assert (code, out, err.splitlines()) == (1, "", ["<stdin>: standard input can be read only once"])


def test_stdin_twice_is_a_problem(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(NODE.encode())))
    code, _, err = run(capsys, ["simulate", "-", "-"])
    assert (code, err.splitlines()) == (1, ["<stdin>: standard input can be read only once"])


def test_a_directory_is_read_as_kubectl_reads_it(tmp_path, capsys):
    """Its .yaml, .yml and .json files in name order; other files and subdirectories are ignored."""
    folder = tmp_path / "cluster"
    (folder / "sub").mkdir(parents=True)
    write(folder, "a-nodes.yml", NODE)
    write(folder, "b-pod.json", json.dumps({"apiVersion": "v1", "kind": "Pod",
                                            "metadata": {"name": "p2", "namespace": "default"},
                                            "spec": {"containers": [{"name": "c"}]}}))
    write(folder, "c-pod.yaml", POD)
    write(folder, "notes.txt", "not: read")
    write(folder / "sub", "ignored.yaml", "kind: Broken")
    code, out, err = run(capsys, ["simulate", str(folder), "-o", "json"])
    assert (code, err) == (0, "")
    assert [(p["name"], p["node"]) for p in json.loads(out)["pods"]] == [("p2", "n1"), ("p1", "n1")]


def test_kinds_the_scheduler_never_reads_are_skipped_with_one_counting_warning(tmp_path, capsys):
    export = write(tmp_path, "export.yaml", "\n---\n".join([
        NODE, POD,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
        "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n",
        "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}\n",
    ]))
    code, out, err = run(capsys, ["simulate", export, "-o", "json"])
    assert code == 0
    assert err.splitlines() == [
        "warning: skipped 4 objects of kinds the scheduler does not read: ConfigMap (3), Secret (1)"]
    assert json.loads(out)["summary"]["scheduled"] == 1


def test_a_kubectl_json_list_and_an_api_pod_list(tmp_path, capsys):
    """`kubectl get nodes -o json` gives a List; the API's PodList leaves out each item's kind."""
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}
    nodes = write(tmp_path, "nodes.json", json.dumps({"apiVersion": "v1", "kind": "List", "items": [node]}))
    pods = write(tmp_path, "pods.json", json.dumps({"apiVersion": "v1", "kind": "PodList", "items": [
        {"metadata": {"name": "p1", "namespace": "ns"}, "spec": {"containers": [{"name": "c"}]}}]}))
    code, out, err = run(capsys, ["simulate", nodes, pods, "-o", "json"])
    assert (code, err) == (0, "")
    assert [(p["namespace"], p["name"], p["node"]) for p in json.loads(out)["pods"]] == [("ns", "p1", "n1")]


def test_problems_name_the_document_and_the_list_item(tmp_path, capsys):
    path = write(tmp_path, "c.yaml", NODE + "---\nkind: List\nitems:\n- " + json.dumps(
        {"kind": "Pod", "metadata": {"name": "x", "labels": {"tier": 1}}, "spec": {"containers": [{"name": "c"}]}}))
    code, _, err = run(capsys, ["simulate", path])
    assert (code, err.splitlines()) == (
        1, [f"{path}: document 2 item 1: Pod/default/x: metadata.labels.tier: must be a string, got integer"])


def test_invalid_json_names_line_and_column(tmp_path, capsys):
    path = write(tmp_path, "c.json", '{"kind": "Pod",\n "metadata": }')
    code, _, err = run(capsys, ["simulate", path])
    assert code == 1
    [line] = err.splitlines()
    assert line.startswith(f"{path}: invalid JSON: line 2, column ")


def test_yaml_niceties(tmp_path):
    """Unquoted timestamps stay strings (as the API's JSON has them); merge keys merge; an
    alias is a copy, so defaulting one object never changes another."""
    path = write(tmp_path, "a.yaml", """\
base: &labels {app: web, tier: front}
pod:
  metadata:
    creationTimestamp: 2026-01-01T00:00:00Z
    labels:
      <<: *labels
      tier: back
  other: *labels
""")
    problems: list[str] = []
    [doc] = list(read_documents([path], problems))
    assert problems == []
    assert doc.obj["pod"]["metadata"] == {"creationTimestamp": "2026-01-01T00:00:00Z",
                                          "labels": {"app": "web", "tier": "back"}}
    assert doc.obj["pod"]["other"] == doc.obj["base"]
    assert doc.obj["pod"]["other"] is not doc.obj["base"]


def test_the_pure_python_parser_reads_the_same(tmp_path, monkeypatch):
    """Where libyaml is missing (or for deeply nested input) PyYAML's own parser runs."""
    path = write(tmp_path, "a.yaml", NODE + "---\n" + POD)
    fast = [d.obj for d in read_documents([path], [])]
    monkeypatch.setattr(libyaml, "_CParser", None)
    assert [d.obj for d in read_documents([path], [])] == fast


# -- progress --------------------------------------------------------------------------------


def test_progress_lines_for_a_long_load(tmp_path):
    path = write(tmp_path, "a.yaml", "---\n".join([NODE] * 3000))
    out = io.StringIO()
    progress = Progress(stream=out, clock=FakeClock(0.0, tick=0.5), after=2.0, every=2.0)
    assert len(list(read_documents([path], [], progress=progress))) == 3000
    lines = out.getvalue().splitlines()
    assert len(lines) >= 2
    assert lines[0].startswith(f"kopfsched: reading {path} (")
    assert re.search(r"\): (checking it before parsing|\d+(\.\d)?% parsed)", lines[0]), lines[0]
    assert lines[-1].startswith("kopfsched: read 3000 objects from 1 file(s) in ")


class SlowStart:
    """A clock where the first reading comes 3 s in: what a 20 MB file's check before parsing takes."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 3.0 if self.now == 0.5 else 0.5
        return self.now


@pytest.mark.parametrize("fast", [True, False], ids=["fast-yaml", "libyaml"])
def test_the_first_progress_line_says_what_is_happening(tmp_path, monkeypatch, fast):
    """Never "0% of 21 MB" after seconds of work: either the check before parsing, or how much is parsed."""
    from kopfsched.documents import fast_yaml

    if not fast:
        monkeypatch.setattr(fast_yaml, "available", lambda: False)
    path = write(tmp_path, "a.yaml", "---\n".join([NODE] * 40_000))  # 5 MB: big enough for a slow check
    out = io.StringIO()
    assert len(list(read_documents([path], [], progress=Progress(stream=out, clock=SlowStart())))) == 40_000
    first = out.getvalue().splitlines()[0]
    assert "% of " not in first
    if fast:
        assert first.startswith(f"kopfsched: reading {path} (") and ": checking it before parsing (" in first
    else:
        share = re.search(r"\): (\d+(?:\.\d)?)% parsed", first)
        assert share is not None and float(share.group(1)) > 0, first


def test_more_problems_than_a_screen_are_counted_not_printed(tmp_path, capsys):
    bad = "---\n".join(f"kind: Node\nmetadata: {{name: bad{i}}}\nstatus: {{allocatable: {{cpu: x}}}}\n"
                       for i in range(30))
    code, _, err = run(capsys, ["simulate", write(tmp_path, "nodes.yaml", NODE + "---\n" + bad)])
    lines = err.splitlines()
    assert code == 1 and len(lines) == 21
    assert lines[0].endswith("Node/bad0: status.allocatable.cpu: invalid quantity 'x'")
    assert lines[-1] == "... and 10 more problem(s) (the first 20 shown)"


@pytest.mark.parametrize("field", ["allocatable", "capacity"])
def test_a_negative_node_quantity_is_refused_as_the_api_server_does(tmp_path, capsys, field):
    node = f"kind: Node\nmetadata: {{name: neg}}\nstatus: {{{field}: {{cpu: '-3', pods: '10'}}}}\n"
    code, _, err = run(capsys, ["simulate", write(tmp_path, "n.yaml", node + "---\n" + NODE)])
    assert code == 1
    assert err.splitlines() == [f'{tmp_path}/n.yaml: document 1: Node/neg: status.{field}.cpu: Invalid value: "-3": '
                                "must be greater than or equal to 0"]


def test_no_progress_for_a_quick_load(tmp_path):
    path = write(tmp_path, "a.yaml", NODE)
    out = io.StringIO()
    list(read_documents([path], [], progress=Progress(stream=out, clock=lambda: 0.0)))
    assert out.getvalue() == ""


@pytest.mark.parametrize(("content", "expected"), [pytest.param(c, e, id=i) for i, c, e in HOSTILE])
def test_simulate_of_nothing_usable_prints_only_the_problem(tmp_path, capsys, content, expected):
    """No empty table that looks like a run: when nothing could be read, the problem is the answer."""
    bad = write(tmp_path, "bad.yaml", content)
    code, out, err = run(capsys, ["simulate", bad])
    assert (code, out, err.splitlines()) == (1, "", [expected.format(f=bad)])


# -- every input path, every kind of bad input ----------------------------------------------

MORE_HOSTILE = [
    ("whitespace-only", b"  \n\t\n   \n", "{f}: no objects (the input is empty)"),
    ("huge-scalar", b"x" * 1_000_000 + b"\n", "{f}: document 1: must be an object, got string"),
    ("list-with-a-garbage-item", b"kind: List\nitems: [just text]\n",
     "{f}: document 1 item 1: must be an object, got string"),
    ("list-with-a-null-item", b"apiVersion: v1\nkind: List\nitems:\n- null\n",
     "{f}: document 1 item 1: must be an object, got null"),
    ("json-garbage", b'{"kind": "Pod", ', None),  # orjson's wording: only the file, the line and "invalid JSON"
]
EVERY_INPUT = HOSTILE + MORE_HOSTILE
COMMANDS = ["simulate", "simulate --profile", "validate", "bench --profile", "run --config", "explain",
            "explain --profile", "simulate --compare", "sandbox"]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(("content", "expected"), [pytest.param(c, e, id=i) for i, c, e in MORE_HOSTILE])
def test_more_hostile_input_is_one_line_and_exit_1_everywhere(tmp_path, capsys, command, content, expected):
    bad = write(tmp_path, "bad.json" if expected is None else "bad.yaml", content)
    code, out, err = run(capsys, subcommands(tmp_path, bad)[command])
    assert code == 1
    if expected is None:
        [line] = err.splitlines()
        assert line.startswith(f"{bad}: invalid JSON: line 1, column ")
    else:
        assert err.splitlines() == [expected.format(f=bad)]
    assert "Traceback" not in out + err


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("path", ["missing.yaml", "no-yaml-dir"], ids=["nonexistent", "directory-without-yaml"])
def test_a_path_that_gives_nothing_is_one_line_everywhere(tmp_path, capsys, command, path):
    (tmp_path / "no-yaml-dir").mkdir()
    write(tmp_path / "no-yaml-dir", "notes.txt", "kind: Pod\n")
    bad = str(tmp_path / path)
    code, out, err = run(capsys, subcommands(tmp_path, bad)[command])
    expected = (f"{bad}: cannot read: No such file or directory" if path == "missing.yaml"
                else f"{bad}: no .yaml, .yml or .json files in the directory")
    assert (code, err.splitlines()) == (1, [expected])
    assert "Traceback" not in out


@pytest.mark.parametrize("command", [c for c in COMMANDS if c != "sandbox"])
@pytest.mark.parametrize(("content", "expected"),
                         [pytest.param(c, e, id=i) for i, c, e in EVERY_INPUT if e is not None])
def test_hostile_stdin_is_the_same_one_line_everywhere(tmp_path, capsys, monkeypatch, command, content, expected):
    """`-` reads standard input: the same problem as from a file, named <stdin>."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(content)))
    code, out, err = run(capsys, subcommands(tmp_path, "-")[command])
    assert code == 1
    assert err.splitlines() == [expected.format(f="<stdin>")]
    assert "Traceback" not in out + err


@pytest.mark.parametrize(("command", "content", "expected"), [
    pytest.param("validate", NODE, "{f}: no SchedulerProfile or KubeSchedulerConfiguration in it", id="validate"),
    pytest.param("simulate --profile", NODE,
                 "{f}: document 1: Node/n1: kind: not a SchedulerProfile or KubeSchedulerConfiguration",
                 id="simulate--profile"),
    pytest.param("explain --profile", NODE,
                 "{f}: document 1: Node/n1: kind: not a SchedulerProfile or KubeSchedulerConfiguration",
                 id="explain--profile"),
    pytest.param("simulate --compare", NODE,
                 "{f}: document 1: Node/n1: kind: not a SchedulerProfile or KubeSchedulerConfiguration",
                 id="simulate--compare"),
    pytest.param("bench --profile", NODE,
                 "{f}: document 1: Node/n1: kind: not a SchedulerProfile or KubeSchedulerConfiguration",
                 id="bench--profile"),
    pytest.param("run --config", PROFILE, "{f}: document 1: SchedulerProfile/packing: kind: must be "
                                          "KubeSchedulerConfiguration", id="run--config"),
    pytest.param("simulate", "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n",
                 "warning: skipped 1 object of kinds the scheduler does not read: Secret (1)", id="simulate"),
])
def test_the_wrong_kind_of_object(tmp_path, capsys, command, content, expected):
    """A profile option given a cluster object (or --config given a profile) names the
    object; simulate skips what it never reads with a warning and schedules the rest."""
    bad = write(tmp_path, "wrong.yaml", content)
    code, _, err = run(capsys, subcommands(tmp_path, bad)[command])
    assert (code, err.splitlines()) == (0 if command == "simulate" else 1, [expected.format(f=bad)])


def test_only_objects_the_scheduler_never_reads_is_not_an_empty_success(tmp_path, capsys):
    secret = write(tmp_path, "secret.yaml", "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n")
    code, out, err = run(capsys, ["simulate", secret])
    assert code == 1
    assert (out, err.splitlines()) == ("", [
        "warning: skipped 1 object of kinds the scheduler does not read: Secret (1)",
        f"{secret}: nothing to schedule: no Nodes, Pods or workloads in it"])


# -- kubeconfig files: run, snapshot, and simulate/explain of a live cluster ----------------------

CLUSTER_COMMANDS = {
    "run": ["run", "--no-leader-elect", "--metrics-port", "0", "--kubeconfig"],
    "snapshot": ["snapshot", "--kubeconfig"],
    "simulate": ["simulate", "--kubeconfig"],
    "explain": ["explain", "default/p1", "--kubeconfig"],
}
KUBECONFIG_READING = [(i, c, e) for i, c, e in EVERY_INPUT
                      if e is not None and i not in ("no-kind", "list-items-not-a-list")]
SERVER = "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\n"
CONTEXT = "contexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x\n"
KUBECONFIG_SHAPES = [
    ("not-a-config", "apiVersion: v1\nkind: Pod\n" + SERVER + CONTEXT, 'kind: must be "Config", got \'Pod\''),
    ("contexts-not-a-list", "contexts: 5\n", "contexts: must be an array, got integer"),
    ("cluster-not-an-object", "clusters: [1]\n", "clusters[0]: must be an object, got integer"),
    ("unnamed-context", "contexts: [{context: {cluster: c}}]\n", "contexts[0].name: required"),
    ("current-context-a-list", "current-context: [x]\n", "current-context: must be a string, got array"),
    ("server-a-number", "clusters: [{name: c, cluster: {server: 5}}]\n" + CONTEXT,
     "clusters[0].cluster.server: must be a string, got integer"),
    ("no-current-context", "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n",
     "current-context: required (the name of the context to use)"),
    ("unknown-context", SERVER + "contexts: []\ncurrent-context: x\n",
     'current-context: no context named "x" in contexts'),
    ("unknown-cluster", "clusters: []\n" + CONTEXT, 'contexts[0].context.cluster: no cluster named "c" in clusters'),
    ("no-server", "clusters: [{name: c, cluster: {}}]\n" + CONTEXT, "clusters[0].cluster.server: required"),
    ("https-without-user", SERVER.replace("http:", "https:") + CONTEXT,
     "contexts[0].context.user: required with an https server"),
    ("unknown-user", SERVER + "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n",
     'contexts[0].context.user: no user named "u" in users'),
]


@pytest.fixture
def no_cluster_env(monkeypatch):
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("command", list(CLUSTER_COMMANDS))
@pytest.mark.parametrize(("content", "expected"), [pytest.param(c, e, id=i) for i, c, e in KUBECONFIG_READING])
def test_a_hostile_kubeconfig_is_the_same_one_line_everywhere(tmp_path, capsys, no_cluster_env, command, content,
                                                              expected):
    bad = write(tmp_path, "kubeconfig", content)
    code, out, err = run(capsys, [*CLUSTER_COMMANDS[command], bad])
    assert (code, out, err.splitlines()) == (1, "", [expected.format(f=bad)])


@pytest.mark.parametrize("command", list(CLUSTER_COMMANDS))
@pytest.mark.parametrize(("content", "expected"), [pytest.param(c, e, id=i) for i, c, e in KUBECONFIG_SHAPES])
def test_a_kubeconfig_the_client_cannot_use_names_the_field(tmp_path, capsys, no_cluster_env, command, content,
                                                            expected):
    """Each of these crashed the Kubernetes client's loader with a traceback, or read as an
    error about something else."""
    bad = write(tmp_path, "kubeconfig", content)
    code, out, err = run(capsys, [*CLUSTER_COMMANDS[command], bad])
    assert (code, out, err.splitlines()) == (1, "", [f"{bad}: document 1: Config: {expected}"])


@pytest.mark.parametrize("command", list(CLUSTER_COMMANDS))
@pytest.mark.parametrize(("path", "expected"), [
    pytest.param("missing", "{p}: cannot read: No such file or directory", id="nonexistent"),
    pytest.param("", "{p}: a directory, not a kubeconfig file", id="directory"),
    pytest.param("-", "<stdin>: a kubeconfig must be a file, not standard input", id="stdin"),
])
def test_a_kubeconfig_path_that_is_no_file(tmp_path, capsys, no_cluster_env, command, path, expected):
    given = "-" if path == "-" else str(tmp_path / path)
    code, _, err = run(capsys, [*CLUSTER_COMMANDS[command], given])
    assert (code, err.splitlines()) == (1, [expected.format(p=given.rstrip("/"))])


@pytest.mark.parametrize("argv", [["snapshot"], ["explain", "default/p1"], ["run", "--no-leader-elect"]],
                         ids=["snapshot", "explain", "run"])
def test_a_bad_file_in_the_kubeconfig_variable_is_named(tmp_path, capsys, no_cluster_env, monkeypatch, argv):
    """$KUBECONFIG's files are checked too (missing ones are skipped, as kubectl does)."""
    bad = write(tmp_path, "bad", b"\x00\x01")
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}:{bad}")
    code, _, err = run(capsys, argv)
    assert (code, err.splitlines()) == (1, [f"{bad}: binary data, not YAML or JSON"])


def test_snapshot_output_is_written_only_when_complete(tmp_path, capsys, no_cluster_env):
    """A failed read of the cluster leaves an existing -o FILE as it was, and no partial file."""
    kubeconfig = write(tmp_path, "kubeconfig", SERVER + CONTEXT)  # nothing listens on port 1
    kept = write(tmp_path, "snapshot.yaml", "kept\n")
    code, _, err = run(capsys, ["snapshot", "-q", "--kubeconfig", kubeconfig, "-o", kept])
    assert code == 1 and len(err.splitlines()) == 1, err
    assert err.startswith("reading the cluster: listing "), "worded as simulate and explain word it"
    assert Path(kept).read_text() == "kept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kubeconfig", "snapshot.yaml"]


@pytest.mark.parametrize(("output", "expected"), [
    pytest.param("", "{o}: cannot write: Is a directory", id="a-directory"),
    pytest.param("missing/snapshot.yaml", "{o}: cannot write: No such file or directory", id="no-such-directory"),
])
def test_snapshot_output_that_cannot_be_written(tmp_path, capsys, no_cluster_env, output, expected):
    kubeconfig = write(tmp_path, "kubeconfig", SERVER + CONTEXT)
    target = str(tmp_path / output) if output else str(tmp_path)
    code, _, err = run(capsys, ["snapshot", "-q", "--kubeconfig", kubeconfig, "-o", target])
    assert (code, err.splitlines()) == (1, [expected.format(o=target)])


@pytest.mark.parametrize(("output", "expected"), [
    pytest.param("", "{o}: cannot write: Is a directory", id="a-directory"),
    pytest.param("missing/sandbox.kubeconfig", "{o}: cannot write: No such file or directory", id="no-such-directory"),
])
def test_sandbox_kubeconfig_out_that_cannot_be_written_is_refused_before_starting(tmp_path, capsys, output, expected):
    target = str(tmp_path / output) if output else str(tmp_path)
    code, out, err = run(capsys, ["sandbox", "--kubeconfig-out", target])
    assert (code, out, err.splitlines()) == (1, "", [expected.format(o=target)])


@pytest.mark.parametrize("argv", [["snapshot", "-q"], ["simulate"], ["explain", "default/p1"]], ids=str)
def test_an_unreachable_cluster_is_the_same_line_everywhere(tmp_path, capsys, no_cluster_env, argv):
    kubeconfig = write(tmp_path, "kubeconfig", SERVER + CONTEXT)  # nothing listens on port 1
    code, out, err = run(capsys, [*argv, "--kubeconfig", kubeconfig])
    assert code == 1
    assert out == ""  # not even the snapshot's header
    [line] = err.splitlines()
    assert line.startswith("reading the cluster: listing ") and "127.0.0.1:1" in line, line


def test_a_binary_device_is_recognised_without_reading_it_to_the_limit(capsys, monkeypatch):
    """/dev/zero is endless: its first 8 KiB say it is binary (it was read up to 1 GiB first)."""
    class Endless(io.RawIOBase):
        served = 0

        def readable(self) -> bool:
            return True

        def readinto(self, buffer) -> int:
            Endless.served += len(buffer)
            buffer[:] = bytes(len(buffer))
            return len(buffer)

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(Endless())))
    code, _, err = run(capsys, ["validate", "-"])
    assert (code, err.splitlines()) == (1, ["<stdin>: binary data, not YAML or JSON"])
    assert Endless.served < 1 << 20


@pytest.mark.parametrize("command", ["validate", "simulate --profile", "explain --profile", "simulate --compare",
                                     "bench --profile"])
def test_a_problem_in_a_configuration_file_reads_the_same_everywhere(tmp_path, capsys, command):
    """A KubeSchedulerConfiguration has no name: labelled by its kind alone in every command."""
    bad = write(tmp_path, "config.yaml", KSC + "profiles:\n- schedulerName: a\n- schedulerName: a\n")
    code, _, err = run(capsys, subcommands(tmp_path, bad)[command])
    assert (code, err.splitlines()) == (1, [
        f'{bad}: document 1: KubeSchedulerConfiguration: profiles[1].schedulerName: scheduler name "a" is also used '
        "by KubeSchedulerConfiguration profiles[0]"])


@pytest.mark.parametrize(("made", "frozen"), [pytest.param(50, False, id="small-load-stays"),
                                              pytest.param(5000, True, id="large-load-frozen")])
def test_what_a_large_load_leaves_is_frozen_out_of_the_gc(monkeypatch, made, frozen):
    """long_lived: no collection inside; afterwards, what a large block left is moved out of the
    collector's generations (gc.freeze), a small one's is not, and collection is on again."""
    monkeypatch.setattr(gcpolicy, "FREEZE_ABOVE", 1000)
    gc.collect()
    before = gc.get_freeze_count()
    try:
        with gcpolicy.owning_the_process(), gcpolicy.long_lived():
            assert not gc.isenabled()
            kept = [{"n": i} for i in range(made)]
        assert gc.isenabled()
        assert (gc.get_freeze_count() >= before + made) is frozen
        assert len(kept) == made
    finally:
        gc.unfreeze()  # a test process keeps nothing frozen

"""Every parser of outside input, fuzzed: arbitrary and mutated input ends in the parser's own
error or a list of problems, never another exception, within the deadline (conftest.py).

Findings are kept as explicit examples (`@example`) under the property that found them."""

from __future__ import annotations

import base64
import contextlib
import json
import pathlib
import tempfile

import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from kopfsched.config.kubeconfig import kubeconfig_problems
from kopfsched.config.parse import parse_kube_scheduler_configuration, parse_scheduler_profile
from kopfsched.documents import read_documents
from kopfsched.framework.labels import SelectorError, label_selector, node_selector
from kopfsched.framework.quantity import QuantityError, milli_value, parse_quantity
from kopfsched.plugins.registry import full_registry
from kopfsched.simulate.loader import load_objects
from tests.fuzz.strategies import json_values, mutated

REGISTRY = full_registry()
PROFILE = {"apiVersion": "kopfsched.dev/v1alpha1", "kind": "SchedulerProfile", "metadata": {"name": "p"},
           "spec": {"schedulerName": "s", "percentageOfNodesToScore": 50, "podInitialBackoffSeconds": 1,
                    "plugins": {"multiPoint": {"enabled": [{"name": "NodeResourcesFit", "weight": 2}],
                                               "disabled": [{"name": "ImageLocality"}]},
                                "queueSort": {"enabled": [{"name": "PrioritySort"}]}},
                    "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {
                        "type": "MostAllocated", "resources": [{"name": "cpu", "weight": 1}]}}},
                                     {"name": "PodTopologySpread", "args": {"defaultingType": "List"}}],
                    "extenders": [{"urlPrefix": "https://e.example", "filterVerb": "f", "prioritizeVerb": "p",
                                   "weight": 1, "httpTimeout": "2s", "managedResources": [{"name": "example.com/x"}],
                                   "tlsConfig": {"insecure": True}}]}}
CONFIGURATION = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                 "leaderElection": {"leaderElect": True, "leaseDuration": "15s"},
                 "clientConnection": {"qps": 50, "burst": 100}, "percentageOfNodesToScore": 0,
                 "profiles": [{"schedulerName": "a", "plugins": PROFILE["spec"]["plugins"],
                               "pluginConfig": PROFILE["spec"]["pluginConfig"]}, {"schedulerName": "b"}],
                 "extenders": PROFILE["spec"]["extenders"]}
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"zone": "a"}},
        "spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1", "namespace": "default", "labels": {"app": "x"}},
       "spec": {"schedulerName": "default-scheduler", "priority": 5,
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "1Gi"}}}],
                "tolerations": [{"key": "k", "operator": "Equal", "value": "v"}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}},
                    "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "zone"}]}},
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                                               "whenUnsatisfiable": "DoNotSchedule",
                                               "labelSelector": {"matchLabels": {"app": "x"}}}]}}
parse_scheduler_profile(PROFILE, REGISTRY)  # loads every plugin once, outside any example's deadline
KUBECONFIG = {"apiVersion": "v1", "kind": "Config", "current-context": "x",
              "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443",
                                                     "certificate-authority-data": base64.b64encode(b"x").decode()}}],
              "users": [{"name": "u", "user": {"token": "t"}}],
              "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}


# -- quantities and selectors ---------------------------------------------------------------


@given(st.one_of(st.text(max_size=40), st.from_regex(r"[+-]?\d{0,30}(\.\d{0,30})?([eE][+-]?\d{1,12}|[numkMGTPE]i?)?",
                                                     fullmatch=True), json_values(5)))
@example("1e999999999")
@example("-1E+999999999999")
@example("1" * 5000)
@example("0." + "0" * 5000 + "1")
def test_quantities(text):
    try:
        milli_value(text)
        parse_quantity(text)
    except QuantityError:
        pass


SELECTOR_KEYS = st.sampled_from(["app", "zone", "example.com/x", "", "a" * 70, "-bad", "x/y/z"])
EXPRESSION = st.fixed_dictionaries({}, optional={
    "key": SELECTOR_KEYS, "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "", "in"]),
    "values": st.lists(st.text(max_size=70), max_size=3)})


@given(st.fixed_dictionaries({}, optional={
    "matchLabels": st.dictionaries(SELECTOR_KEYS, st.text(max_size=70), max_size=3),
    "matchExpressions": st.lists(EXPRESSION, max_size=3)}), st.dictionaries(SELECTOR_KEYS, st.text(max_size=5)))
def test_label_selectors(selector, labels):
    with contextlib.suppress(SelectorError):
        label_selector(selector)(labels)


@given(st.lists(st.fixed_dictionaries({}, optional={
    "matchExpressions": st.lists(EXPRESSION, max_size=3),
    "matchFields": st.lists(st.fixed_dictionaries({"key": st.sampled_from(["metadata.name", "spec.x"]),
                                                   "operator": st.sampled_from(["In", "NotIn", "Exists"])},
                                                  optional={"values": st.lists(st.text(max_size=5), max_size=2)}),
                            max_size=2)}), max_size=3), st.dictionaries(SELECTOR_KEYS, st.text(max_size=5)))
def test_node_selectors(terms, labels):
    with contextlib.suppress(SelectorError):
        node_selector(terms)(labels, "n1")


# -- configuration --------------------------------------------------------------------------


@given(st.one_of(json_values(), mutated(PROFILE)))
def test_scheduler_profiles(obj):
    _, problems = parse_scheduler_profile(obj, REGISTRY)
    assert all(isinstance(problem.message, str) for problem in problems)


@given(st.one_of(json_values(), mutated(CONFIGURATION)))
def test_kube_scheduler_configurations(obj):
    _, problems = parse_kube_scheduler_configuration(obj, REGISTRY)
    assert all(isinstance(problem.message, str) for problem in problems)


# -- files: snapshots (YAML and JSON) and kubeconfigs ---------------------------------------


def _with_file(data: bytes, suffix: str, check) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp, f"input{suffix}")
        path.write_bytes(data)
        check(str(path))


SNAPSHOT_YAML = yaml.safe_dump_all([NODE, POD]).encode()


def yaml_mutations() -> st.SearchStrategy[bytes]:
    """The snapshot's YAML with bytes cut, repeated or replaced (anchors, tags, tabs...)."""
    tokens = st.sampled_from([b"&a ", b"*a", b"!!python/object:os.system ", b"<<: *a\n", b"\t", b"---\n", b"...\n",
                              b"- ", b": ", b"{", b"[", b"'", b'"', b"\x00", b"\xff", b"%YAML 1.1\n", b"? ", b"|\n"])
    return st.tuples(st.integers(0, len(SNAPSHOT_YAML)), st.integers(0, 40), st.lists(tokens, max_size=4)).map(
        lambda cut: SNAPSHOT_YAML[:cut[0]] + b"".join(cut[2]) + SNAPSHOT_YAML[cut[0] + cut[1]:])


@given(st.one_of(st.binary(max_size=200), yaml_mutations(),
                 st.lists(st.one_of(mutated(NODE), mutated(POD)), max_size=3).map(
                     lambda objs: yaml.safe_dump_all(objs).encode())))
@example(b"kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: true}]}\n")
@example(b"a: &a [*a]\n")
@example(b"- " * 10000 + b"x\n")
@example(b"[" * 100000)
@example(b"a: &a ['lol','lol']\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
         b"d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n")
def test_yaml_snapshots(data):
    def check(path: str) -> None:
        problems: list[str] = []
        loaded = load_objects((document.obj for document in read_documents([path], problems)), path)
        assert all(isinstance(line, str) and "\n" not in line for line in problems + loaded.problems)
    _with_file(data, ".yaml", check)


@given(st.one_of(st.binary(max_size=200),
                 st.lists(st.one_of(mutated(NODE), mutated(POD), json_values(10)), max_size=3).map(
                     lambda objs: json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}).encode())))
@example(b'{"kind": "List", "items": ' + b"[" * 100000 + b"]" * 100000 + b"}")
def test_json_snapshots(data):
    def check(path: str) -> None:
        problems: list[str] = []
        loaded = load_objects((document.obj for document in read_documents([path], problems)), path)
        assert all(isinstance(line, str) and "\n" not in line for line in problems + loaded.problems)
    _with_file(data, ".json", check)


@given(st.one_of(st.binary(max_size=200), mutated(KUBECONFIG).map(lambda obj: yaml.safe_dump(obj).encode())))
def test_kubeconfigs(data):
    _with_file(data, "", lambda path: kubeconfig_problems(path))


@pytest.mark.parametrize("data", [b"", b"\x00", b"[]", b"- 1\n", b"a: 1\n---\nb: 2\n"])
def test_kubeconfigs_known_shapes(data):
    _with_file(data, "", lambda path: kubeconfig_problems(path))


def test_resources_that_are_not_an_object_are_one_problem(tmp_path):
    """Found by test_yaml_snapshots: `resources: true` was an AttributeError in the loader."""
    path = tmp_path / "pod.yaml"
    path.write_text("kind: Pod\nmetadata: {name: p, namespace: default}\n"
                    "spec: {containers: [{name: c, resources: true}]}\n")
    problems: list[str] = []
    loaded = load_objects((document.obj for document in read_documents([str(path)], problems)), str(path))
    assert problems + loaded.problems == [
        f"{path}: object 1: Pod/default/p: spec.containers[0].resources: must be an object"]

"""Label selector keys and values validated as upstream's labels.NewRequirement, on every
path that parses one: a node affinity term with an invalid value matches nothing (upstream's
NodeAffinity case "Pod with an invalid value in Affinity term won't be scheduled onto the
node"), pod affinity and spread constraints fail the pod, a PDB's invalid selector protects
no pod."""

from __future__ import annotations

import pytest

from kopfsched.framework.labels import SelectorError, label_selector, node_selector
from kopfsched.framework.preemption import DisruptionBudget, filter_pods_with_pdb_violation
from kopfsched.framework.types import PodInfo
from kopfsched.testing import make_node, make_pod, schedule

INVALID = "invalid value: ___@#$%^"
BAD_VALUE = (f'values: Invalid value: "{INVALID}": a valid label must be an empty string or consist of alphanumeric '
             "characters, '-', '_' or '.', and must start and end with an alphanumeric character")
NO_PREEMPTION = "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."


def affinity(operator: str, values: list[str], key: str = "foo") -> dict:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": key, "operator": operator, "values": values}]}]}}}


@pytest.mark.parametrize(("key", "operator", "values", "problem"), [
    pytest.param("foo", "NotIn", [INVALID], f'values: Invalid value: "{INVALID}": a valid label must be an empty '
                 "string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                 "alphanumeric character", id="invalid-value"),
    pytest.param("foo", "In", ["x" * 64], f'values: Invalid value: "{"x" * 64}": must be no more than 63 characters',
                 id="value-too-long"),
    pytest.param("-foo", "Exists", [], 'key: Invalid value: "-foo": name part must consist of alphanumeric '
                 "characters, '-', '_' or '.', and must start and end with an alphanumeric character",
                 id="invalid-key"),
    pytest.param("Example.COM/foo", "Exists", [], 'key: Invalid value: "Example.COM/foo": prefix part must be a '
                 "lowercase RFC 1123 subdomain", id="invalid-prefix"),
    pytest.param("a/b/c", "Exists", [], 'key: Invalid value: "a/b/c": a qualified name must consist of alphanumeric '
                 "characters, '-', '_' or '.', and must start and end with an alphanumeric character",
                 id="two-slashes"),
])
def test_requirements_are_validated_as_new_requirement(key, operator, values, problem):
    with pytest.raises(SelectorError) as caught:
        label_selector({"matchExpressions": [{"key": key, "operator": operator, "values": values}]})
    assert str(caught.value) == problem
    with pytest.raises(SelectorError):
        node_selector([{"matchExpressions": [{"key": key, "operator": operator, "values": values}]}])


@pytest.mark.parametrize("selector", [
    {"matchLabels": {"kubernetes.io/hostname": "node-1", "app": ""}},
    {"matchExpressions": [{"key": "example.com/tier", "operator": "In", "values": ["a.b-c_d", "x"]}]},
])
def test_valid_selectors_still_compile(selector):
    assert label_selector(selector)({"kubernetes.io/hostname": "node-1", "app": "", "example.com/tier": "x"}) is True
    assert node_selector([{"matchExpressions": [{"key": "size", "operator": "Gt", "values": ["3"]}]}])(
        {"size": "4"}, "node-1") is True


def test_invalid_match_labels_value_is_rejected():
    with pytest.raises(SelectorError, match=r'^values: Invalid value: "a b"'):
        label_selector({"matchLabels": {"app": "a b"}})


def test_node_affinity_with_an_invalid_value_is_not_scheduled():
    result = schedule(nodes=[make_node("node-1", labels={"foo": "bar"})],
                      pods=[make_pod("p", affinity=affinity("NotIn", [INVALID]))])
    assert result.placements == {"p": None}
    assert result.messages["p"] == f"0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. " \
                                   f"{NO_PREEMPTION}"
    assert result.report["pods"][0]["filter"]["node-1"]["code"] == "UnschedulableAndUnresolvable"


def test_node_affinity_invalid_term_is_ignored_while_another_term_matches():
    terms = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "foo", "operator": "In", "values": [INVALID]}]},
        {"matchExpressions": [{"key": "foo", "operator": "In", "values": ["bar"]}]}]}}}
    result = schedule(nodes=[make_node("node-1", labels={"foo": "bar"})], pods=[make_pod("p", affinity=terms)])
    assert result.placements == {"p": "node-1"}


def test_pod_affinity_with_an_invalid_selector_is_not_scheduled():
    term = {"labelSelector": {"matchLabels": {"app": INVALID}}, "topologyKey": "kubernetes.io/hostname"}
    result = schedule(nodes=[make_node("node-1")], pods=[make_pod("p", affinity={"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [term]}})])
    assert result.placements == {"p": None}
    # The rejection comes before DynamicResources' PreFilter: its PostFilter finds no state,
    # and v1.37.2's message ends in that Error ("not found") instead of preemption's text.
    assert result.messages["p"] == f"0/1 nodes are available: parsing pod: {BAD_VALUE}. not found"
    assert result.report["pods"][0]["filter"]["node-1"]["plugin"] == "InterPodAffinity"


def test_spread_constraint_with_an_invalid_selector_is_not_scheduled():
    constraint = {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
                  "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": [INVALID]}]}}
    result = schedule(nodes=[make_node("node-1")], pods=[make_pod("p", topologySpreadConstraints=[constraint])])
    assert result.placements == {"p": None}
    # An error, as upstream's PreFilter: the pod backs off and is retried, never placed.
    assert result.messages["p"] == ('running PreFilter plugin "PodTopologySpread": obtaining pod\'s hard topology '
                                    f"spread constraints: {BAD_VALUE}")


def test_a_pdb_with_an_invalid_selector_protects_no_pod():
    pdb = {"metadata": {"name": "b", "namespace": "default"},
           "spec": {"selector": {"matchLabels": {"app": INVALID}}}, "status": {"disruptionsAllowed": 0}}
    valid = {**pdb, "spec": {"selector": {"matchLabels": {"app": "web"}}}}
    pods = [PodInfo(make_pod("v", labels={"app": "web"}))]
    assert filter_pods_with_pdb_violation(pods, [DisruptionBudget.from_obj(pdb)]) == ([], pods)
    assert filter_pods_with_pdb_violation(pods, [DisruptionBudget.from_obj(valid)]) == (pods, [])

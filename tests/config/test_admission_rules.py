"""The CRD's admission rules and kopfsched's own validation agree: every profile the API server
refuses (tests/config/admission_cases.py) is refused by `parse_scheduler_profile` at the same
field, and every CEL rule of the CRD (evaluated here with the CEL runtime kopfsched already uses)
fails on exactly the cases that say so and holds on every accepted one and every example.

jsonschema checks the schema keywords (maxItems, pattern, minimum...) from the CRD itself
(config/schema.py); the CEL rules and list-type maps it cannot read are mirrored in parse.py,
field_checks.py and extenders.py — this test is what keeps the two in step."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from kopfsched.config import parse_scheduler_profile
from kopfsched.config.schema import PLUGIN_NAME, PLUGIN_NAME_OR_WILDCARD
from kopfsched.plugins.registry import full_registry
from tests.config.admission_cases import ACCEPTED, REFUSED, Refused, enabled, profile

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRD = yaml.safe_load((ROOT / "crds" / "schedulerprofile.yaml").read_text())
SCHEMA = CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
EXAMPLES = [doc for path in sorted((ROOT / "examples" / "profiles").glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text()) if doc and doc.get("kind") == "SchedulerProfile"]


def rules(schema: dict[str, Any], value: Any, path: str) -> Iterator[tuple[dict[str, str], Any, str]]:
    """(rule, the value it sees as `self`, the value's path) for every CEL rule that applies."""
    if value is None:
        return
    for rule in schema.get("x-kubernetes-validations", ()):
        yield rule, value, path
    if isinstance(value, dict):
        for key, child in schema.get("properties", {}).items():
            yield from rules(child, value.get(key), f"{path}.{key}" if path else key)
    elif isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            yield from rules(schema["items"], item, f"{path}[{index}]")


def failed_rules(obj: dict[str, Any]) -> list[tuple[str, str]]:
    """(field the API server would name, message) of every CEL rule that fails on `obj`."""
    from cel_expr_python import cel

    env = cel.NewEnv(variables={"self": cel.Type.DYN})
    failed = []
    for rule, value, path in rules(SCHEMA, obj, ""):
        result = env.compile(rule["rule"]).eval(data={"self": value})
        assert result.type().name() == "BOOL", (rule["rule"], result.value())
        if not result.value():
            failed.append((path + rule.get("fieldPath", ""), rule["message"]))
    return failed


def parse_problems(obj: dict[str, Any]) -> list[str]:
    _, problems = parse_scheduler_profile(obj, full_registry())
    return [problem.path for problem in problems]


@pytest.mark.parametrize("case", REFUSED, ids=lambda case: case.id)
def test_kopfsched_refuses_what_the_api_server_refuses_at_the_same_field(case: Refused):
    paths = parse_problems(profile("bad", case.spec))
    assert paths, "accepted by kopfsched validate"
    assert any(path == case.field or path.startswith(case.field + ".") or path.startswith(case.field + "[")
               for path in paths), paths


@pytest.mark.parametrize("case", REFUSED, ids=lambda case: case.id)
def test_the_cel_rules_fail_exactly_where_the_table_says(case: Refused):
    failed = failed_rules(profile("bad", case.spec))
    if case.cel:
        assert failed == [(case.field, failed[0][1])] and case.api_message in failed[0][1]
    else:
        assert failed == []


@pytest.mark.parametrize(("name", "spec"), ACCEPTED, ids=[name for name, _ in ACCEPTED])
def test_accepted_profiles_pass_both(name, spec):
    obj = profile(name, spec)
    assert failed_rules(obj) == []
    assert parse_problems(obj) == []


@pytest.mark.parametrize("doc", EXAMPLES, ids=lambda doc: doc["metadata"]["name"])
def test_the_examples_pass_every_cel_rule(doc):
    assert failed_rules(doc) == []


def test_every_cel_rule_is_exercised_by_the_table():
    messages = {rule["message"] for rule, _, _ in rules_everywhere(SCHEMA)}
    refused = {message for case in REFUSED for _, message in failed_rules(profile("bad", case.spec))}
    assert refused == messages


def rules_everywhere(schema: Any) -> Iterator[tuple[dict[str, str], None, None]]:
    if isinstance(schema, dict):
        for rule in schema.get("x-kubernetes-validations", ()):
            yield rule, None, None
        for value in schema.values():
            yield from rules_everywhere(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from rules_everywhere(value)


def test_the_plugin_name_patterns_are_the_crds():
    """config/schema.py words a pattern failure by the pattern: they must be the CRD's."""
    plugins = SCHEMA["properties"]["spec"]["properties"]["plugins"]["properties"]
    patterns = {(key, plugin_set["properties"][key]["items"]["properties"]["name"]["pattern"])
                for plugin_set in plugins.values() for key in ("enabled", "disabled")}
    assert patterns == {("enabled", PLUGIN_NAME), ("disabled", PLUGIN_NAME_OR_WILDCARD)}


def test_the_plugin_lists_are_maps_keyed_by_name():
    """What makes the API server refuse a name listed twice (`Duplicate value`)."""
    spec = SCHEMA["properties"]["spec"]["properties"]
    lists = [spec["pluginConfig"]] + [plugin_set["properties"][key] for plugin_set in
                                      spec["plugins"]["properties"].values() for key in ("enabled", "disabled")]
    assert {(item["x-kubernetes-list-type"], tuple(item["x-kubernetes-list-map-keys"])) for item in lists} == {
        ("map", ("name",))}


@pytest.mark.parametrize(("spec", "expected"), [
    ({"plugins": {"filter": enabled("*")}}, ['spec.plugins.filter.enabled[0].name: "*" can only be disabled']),
    ({"plugins": {"filter": enabled("Node Name")}},
     ["spec.plugins.filter.enabled[0].name: invalid plugin name 'Node Name': letters, digits and -_./ only, "
      "starting and ending with a letter or digit"]),
    ({"plugins": {"queueSort": {**enabled("PrioritySort", "PrioritySort2"), "disabled": [{"name": "*"}]}}},
     ["spec.plugins.queueSort.enabled: must have at most 1 item, got 2"]),
    ({"plugins": {"score": {"disabled": [{"name": "ImageLocality"}, {"name": "ImageLocality"}]}}},
     ['spec.plugins.score.disabled[1].name: plugin "ImageLocality" is disabled more than once at score']),
    ({"plugins": {"filter": enabled("P" * 254)}}, ["spec.plugins.filter.enabled[0].name: must be at most 253 "
                                                    "characters, got 254"]),
], ids=["wildcard-enabled", "space", "two-queue-sorts", "disabled-twice", "too-long"])
def test_kopfsched_words_the_new_constraints(spec, expected):
    _, problems = parse_scheduler_profile(profile("bad", spec), full_registry())
    assert [f"{problem.path}: {problem.message}" for problem in problems] == expected

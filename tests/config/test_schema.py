"""A profile's structure is the SchedulerProfile CRD's schema: the package's copy is the CRD,
a change of the schema alone changes what validation says, and the semantic rules still see
what the schema let through."""

from __future__ import annotations

import copy
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from kopfsched.config import parse_kube_scheduler_configuration, parse_scheduler_profile, schema
from tests.config.fakes import fake_registry, scheduler_profile

ROOT = pathlib.Path(__file__).resolve().parents[2]


def problems_of(obj: Any) -> list[str]:
    profile, problems = parse_scheduler_profile(obj, fake_registry())
    assert (profile is None) == bool(problems)
    return [str(problem) for problem in problems]


def ksc_problems_of(obj: dict[str, Any]) -> list[str]:
    document = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration", **obj}
    config, problems = parse_kube_scheduler_configuration(document, fake_registry())
    assert (config is None) == bool(problems)
    return [str(problem) for problem in problems]


def test_the_package_ships_the_crd_itself():
    shipped = ROOT / "operator" / "kopfsched" / "config" / schema.CRD_RESOURCE
    assert shipped.read_bytes() == (ROOT / "crds" / "schedulerprofile.yaml").read_bytes(), (
        "copy crds/schedulerprofile.yaml to operator/kopfsched/config/crds/: validation reads the package's copy")
    assert schema.load_crd() == yaml.safe_load((ROOT / "crds" / "schedulerprofile.yaml").read_text())
    assert schema.load_crd()["spec"]["names"]["kind"] == "SchedulerProfile"


@pytest.fixture
def edited_crd(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A copy of the CRD the test edits; validation reads it instead of the shipped one."""
    crd = copy.deepcopy(schema.load_crd())
    monkeypatch.setattr(schema, "load_crd", lambda: crd)
    schema.reload_schema()
    yield crd
    schema.reload_schema()


def spec_properties(crd: dict[str, Any]) -> dict[str, Any]:
    properties: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return properties["properties"]


def score_entry(crd: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = spec_properties(crd)["plugins"]["properties"]["score"]["properties"]["enabled"]["items"]
    return entry


WEIGHT_AS_STRING = {"plugins": {"score": {"enabled": [{"name": "ImageLocality", "weight": "3"}]}}}
WEIGHT_AS_INTEGER = {"plugins": {"score": {"enabled": [{"name": "ImageLocality", "weight": 3}]}}}


def test_with_the_shipped_schema_a_weight_is_an_integer():
    assert problems_of(scheduler_profile(WEIGHT_AS_STRING)) == [
        "spec.plugins.score.enabled[0].weight: must be an integer, got string"]
    assert problems_of(scheduler_profile(WEIGHT_AS_INTEGER)) == []


def test_changing_a_fields_type_in_the_schema_alone_changes_validation(edited_crd):
    weight = score_entry(edited_crd)["properties"]["weight"]
    weight.clear()
    weight["type"] = "string"
    assert problems_of(scheduler_profile(WEIGHT_AS_INTEGER)) == [
        "spec.plugins.score.enabled[0].weight: must be a string, got integer"]
    # The same profile inside a KubeSchedulerConfiguration: the same schema.
    assert ksc_problems_of({"profiles": [WEIGHT_AS_INTEGER]}) == [
        "profiles[0].plugins.score.enabled[0].weight: must be a string, got integer"]


def test_changing_a_range_in_the_schema_alone_changes_validation(edited_crd):
    spec_properties(edited_crd)["percentageOfNodesToScore"]["maximum"] = 50
    assert problems_of(scheduler_profile({"percentageOfNodesToScore": 60})) == [
        "spec.percentageOfNodesToScore: must be at most 50, got 60"]
    assert ksc_problems_of({"profiles": [{"percentageOfNodesToScore": 60}]}) == [
        "profiles[0].percentageOfNodesToScore: must be at most 50, got 60"]


def test_a_field_added_to_the_schema_is_no_longer_unknown_and_a_required_one_is_required(edited_crd):
    assert problems_of(scheduler_profile({"note": "x"})) != []
    spec = edited_crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["properties"]["note"] = {"type": "string"}
    schema.reload_schema()
    assert problems_of(scheduler_profile({"note": "x"})) == []
    spec["required"] = ["note"]
    schema.reload_schema()
    assert problems_of(scheduler_profile({})) == ["spec.note: required"]


def test_unknown_fields_are_rejected_where_the_schema_lists_properties_only():
    assert problems_of(scheduler_profile({
        "schedulerNmae": "x",
        "plugins": {"score": {"enabled": [{"name": "ImageLocality", "wieght": 2}]}},
        # args preserve unknown fields in the CRD: the plugin's decoder judges them.
        "pluginConfig": [{"name": "MyPlugin", "args": {"level": 5}}],
    })) == [
        "spec.plugins.score.enabled[0].wieght: unknown field",
        "spec.schedulerNmae: unknown field",
    ]


def test_a_null_field_is_absent_as_the_api_server_drops_it():
    assert problems_of(scheduler_profile({"percentageOfNodesToScore": None, "plugins": {"score": None}})) == []


def test_the_semantic_rules_still_judge_what_the_schema_let_through_with_the_original_indexes():
    assert problems_of(scheduler_profile({
        "plugins": {"score": {"enabled": [{"weight": 2}, {"name": "Foo"}, {"name": "ImageLocality", "weight": 2}]}},
        "pluginConfig": [{"name": 7}, {"name": "Bar"}],
    })) == [
        "spec.plugins.score.enabled[0].name: required",
        "spec.pluginConfig[0].name: must be a string, got integer",
        'spec.plugins.score.enabled[1].name: unknown plugin "Foo": neither built in nor installed',
        'spec.pluginConfig[1].name: unknown plugin "Bar": neither built in nor installed',
    ]


def test_a_kube_scheduler_configurations_profiles_and_extenders_follow_the_crd_schema():
    assert ksc_problems_of({
        "profiles": [{"schedulerName": "a", "podMaxBackoffSeconds": 3}, {"schedulerName": 5}],
        "extenders": [{"urlPrefix": "http://127.0.0.1:1", "weight": "2", "tlsConfig": {"caData": "%%"}}, None],
    }) == [
        "extenders[0].weight: must be an integer, got string",
        "extenders[0].tlsConfig.caData: must be a base64 string",
        "extenders[1]: must be an object, got null",
        # podMaxBackoffSeconds is a SchedulerProfile spec field, not a KubeSchedulerProfile one.
        "profiles[0].podMaxBackoffSeconds: unknown field",
        "profiles[1].schedulerName: must be a string, got integer",
    ]

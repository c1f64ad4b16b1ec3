"""Every validation problem, with its exact field path and message."""

from __future__ import annotations

from typing import Any

import pytest

from kopfsched.config import Problem, check_profiles_consistent, parse_scheduler_profile
from tests.config.fakes import fake_registry, scheduler_profile


def problems_of(obj: Any) -> list[str]:
    profile, problems = parse_scheduler_profile(obj, fake_registry())
    assert (profile is None) == bool(problems)
    return [str(problem) for problem in problems]


@pytest.mark.parametrize(("spec", "expected"), [
    pytest.param({"plugins": {"score": {"enabled": [{"name": "Foo"}]}}},
                 ['spec.plugins.score.enabled[0].name: unknown plugin "Foo": neither built in nor installed'],
                 id="unknown-plugin"),
    pytest.param({"plugins": {"score": {"enabled": [{"name": "NodeName"}]}}},
                 ['spec.plugins.score.enabled[0].name: plugin "NodeName" does not implement the score extension point'],
                 id="point-not-implemented"),
    pytest.param({"plugins": {"score": {"enabled": [{"name": "ImageLocality", "weight": 0}]}}},
                 ["spec.plugins.score.enabled[0].weight: must be at least 1, got 0"],
                 id="weight-zero"),
    pytest.param({"plugins": {"multiPoint": {"enabled": [{"name": "MyPlugin", "weight": -2}]}}},
                 ["spec.plugins.multiPoint.enabled[0].weight: must be at least 1, got -2"],
                 id="weight-negative-multipoint"),
    pytest.param({"plugins": {"score": {"enabled": [{"name": "ImageLocality", "weight": 2**31}]}}},
                 ["spec.plugins.score.enabled[0].weight: must be at most 2147483647, got 2147483648"],
                 id="weight-too-large"),
    pytest.param({"plugins": {"score": {"enabled": [{"name": "ImageLocality", "weight": "2"}]}}},
                 ["spec.plugins.score.enabled[0].weight: must be an integer, got string"], id="weight-not-integer"),
    pytest.param({"plugins": {"queueSort": {"enabled": [{"name": "OtherSort"}]}}},
                 ['spec.plugins.queueSort: only one queue sort plugin can be enabled, got "PrioritySort", "OtherSort"'],
                 id="two-queue-sorts"),
    pytest.param({"plugins": {"queueSort": {"disabled": [{"name": "*"}]}}},
                 ["spec.plugins.queueSort: no queue sort plugin is enabled"], id="no-queue-sort"),
    pytest.param({"plugins": {"bind": {"disabled": [{"name": "DefaultBinder"}]}}},
                 ["spec.plugins.bind: at least one bind plugin is needed"], id="no-binder"),
    pytest.param({"plugins": {"score": {"enabled": [{"name": "ImageLocality"}, {"name": "ImageLocality"}]}}},
                 ['spec.plugins.score.enabled[1].name: plugin "ImageLocality" is enabled more than once at score'],
                 id="enabled-twice"),
    pytest.param({"plugins": {"score": {"enabled": [{"name": "*"}]}}},
                 ['spec.plugins.score.enabled[0].name: "*" can only be disabled'], id="star-enabled"),
    pytest.param({"plugins": {"score": {"enabled": [{"weight": 2}]}}},
                 ["spec.plugins.score.enabled[0].name: required"], id="name-missing"),
    pytest.param({"pluginConfig": [{"name": "NodeResourcesFit", "args": {"level": 0, "speed": 1}}]},
                 ["spec.pluginConfig[0].args.speed: unknown field",
                  "spec.pluginConfig[0].args.level: must be in 1..100, got 0"], id="bad-args"),
    pytest.param({"pluginConfig": [{"name": "NodeName", "args": {"x": 1}}]},
                 ["spec.pluginConfig[0].args: plugin NodeName takes no args"], id="args-for-argless-plugin"),
    pytest.param({"pluginConfig": [{"name": "NodeResourcesFit", "args": [1]}]},
                 ["spec.pluginConfig[0].args: must be an object, got array"], id="args-not-object"),
    pytest.param({"pluginConfig": [{"name": "Foo", "args": {}}]},
                 ['spec.pluginConfig[0].name: unknown plugin "Foo": neither built in nor installed'],
                 id="config-for-unknown-plugin"),
    pytest.param({"pluginConfig": [{"name": "MyPlugin"}, {"name": "MyPlugin", "args": {"level": 3}}]},
                 ['spec.pluginConfig[1].name: repeated config for plugin "MyPlugin"'], id="config-repeated"),
    pytest.param({"percentageOfNodesToScore": 101},
                 ["spec.percentageOfNodesToScore: must be at most 100, got 101"], id="percentage-over"),
    pytest.param({"percentageOfNodesToScore": -1},
                 ["spec.percentageOfNodesToScore: must be at least 0, got -1"], id="percentage-under"),
    pytest.param({"podInitialBackoffSeconds": 0},
                 ["spec.podInitialBackoffSeconds: must be at least 1, got 0"], id="backoff-initial-zero"),
    pytest.param({"podInitialBackoffSeconds": 5, "podMaxBackoffSeconds": 2},
                 ["spec.podMaxBackoffSeconds: must be greater than or equal to podInitialBackoffSeconds (5), got 2"],
                 id="backoff-max-below-initial"),
    pytest.param({"podInitialBackoffSeconds": 20},
                 ["spec.podMaxBackoffSeconds: must be greater than or equal to podInitialBackoffSeconds (20),"
                  " got the default 10"], id="backoff-initial-above-default-max"),
    pytest.param({"plugins": {"score": {"enabled": "ImageLocality"}}},
                 ["spec.plugins.score.enabled: must be an array, got string"], id="string-where-list-belongs"),
    pytest.param({"plugins": ["score"]}, ["spec.plugins: must be an object, got array"], id="plugins-not-object"),
    pytest.param({"plugins": {"score": {"enabled": ["ImageLocality"]}}},
                 ["spec.plugins.score.enabled[0]: must be an object, got string"], id="entry-not-object"),
    pytest.param({"plugins": {"scores": {}}}, ["spec.plugins.scores: unknown field"], id="unknown-point"),
    pytest.param({"schedulerNmae": "x"}, ["spec.schedulerNmae: unknown field"], id="unknown-spec-field"),
    pytest.param({"percentageOfNodesToScore": "50%"},
                 ["spec.percentageOfNodesToScore: must be an integer, got string"], id="percentage-not-integer"),
    pytest.param({"schedulerName": ""}, ["spec.schedulerName: required"], id="empty-scheduler-name"),
])
def test_problem(spec, expected):
    assert problems_of(scheduler_profile(spec)) == expected


def test_every_problem_is_reported_at_once():
    spec = {
        "percentageOfNodesToScore": 200,
        "plugins": {"score": {"enabled": [{"name": "Foo"}, {"name": "NodeName"}, {"name": "MyPlugin", "weight": 0}]}},
        "pluginConfig": [{"name": "MyPlugin", "args": {"level": 1000}}],
    }
    assert problems_of(scheduler_profile(spec)) == [
        # The schema's findings first, then the semantic rules' on what the schema let through.
        "spec.percentageOfNodesToScore: must be at most 100, got 200",
        "spec.plugins.score.enabled[2].weight: must be at least 1, got 0",
        'spec.plugins.score.enabled[0].name: unknown plugin "Foo": neither built in nor installed',
        'spec.plugins.score.enabled[1].name: plugin "NodeName" does not implement the score extension point',
        "spec.pluginConfig[0].args.level: must be in 1..100, got 1000",
    ]


@pytest.mark.parametrize(("obj", "expected"), [
    pytest.param("spec: {}", ["must be an object, got string"], id="not-an-object"),
    pytest.param({"apiVersion": "v1", "kind": "SchedulerProfile", "metadata": {"name": "a"}},
                 ["apiVersion: must be \"kopfsched.dev/v1alpha1\", got 'v1'"], id="wrong-api-version"),
    pytest.param({"apiVersion": "kopfsched.dev/v1alpha1", "kind": "SchedulerProfile", "metadata": {}},
                 ["metadata.name: required", "spec.schedulerName: required"], id="no-name"),
    pytest.param({**scheduler_profile(), "spec": "fast"}, ["spec: must be an object, got string"], id="spec-string"),
])
def test_object_problems(obj, expected):
    assert problems_of(obj) == expected


def profile(name: str, spec: dict[str, Any] | None = None):
    parsed, problems = parse_scheduler_profile(scheduler_profile(spec, name), fake_registry())
    assert problems == [] and parsed is not None
    return parsed


OTHER_SORT = {"plugins": {"queueSort": {"enabled": [{"name": "OtherSort"}], "disabled": [{"name": "*"}]}}}


@pytest.mark.parametrize(("profiles", "expected"), [
    pytest.param([profile("a"), profile("b")], [], id="consistent"),
    pytest.param([profile("a"), profile("b", {"schedulerName": "a"})],
                 [Problem("spec.schedulerName", 'scheduler name "a" is also used by SchedulerProfile/a',
                          "SchedulerProfile/b")], id="duplicate-name"),
    pytest.param([profile("a"), profile("b", OTHER_SORT)],
                 [Problem("spec.plugins.queueSort", 'queueSort must be the same for all profiles: "OtherSort" here,'
                          ' "PrioritySort" in SchedulerProfile/a', "SchedulerProfile/b")], id="queue-sort-differs"),
    pytest.param([profile("a"), profile("b", {"pluginConfig": [{"name": "PrioritySort", "args": {"level": 2}}]})],
                 [Problem("spec.pluginConfig", 'queueSort must be the same for all profiles: args of "PrioritySort"'
                          " differ from SchedulerProfile/a", "SchedulerProfile/b")], id="queue-sort-args-differ"),
])
def test_check_profiles_consistent(profiles, expected):
    assert check_profiles_consistent(profiles) == expected


def test_problem_str():
    assert str(Problem("spec.plugins", "unknown field")) == "spec.plugins: unknown field"
    assert str(Problem("", "must be an object, got string")) == "must be an object, got string"

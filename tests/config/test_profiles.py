"""SchedulerProfile parsing: upstream's merge rules and multiPoint expansion."""

from __future__ import annotations

from typing import Any

import pytest

from kopfsched.config import parse_scheduler_profile
from tests.config.fakes import fake_registry, scheduler_profile

DEFAULT_SCORE = [("TaintToleration", 3), ("NodeAffinity", 2), ("NodeResourcesFit", 1), ("PodTopologySpread", 2),
                 ("InterPodAffinity", 2), ("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1)]


def parse(spec: dict[str, Any] | None, name: str = "test"):
    profile, problems = parse_scheduler_profile(scheduler_profile(spec, name), fake_registry())
    assert problems == []
    assert profile is not None
    return profile


def weighted(profile, point: str = "score") -> list[tuple[str, int | None]]:
    return [(ref.name, ref.weight) for ref in profile.plugins[point]]


def test_empty_spec_is_the_default_profile_named_after_the_object():
    profile = parse(None, name="batch")
    assert profile.scheduler_name == "batch"
    assert profile.source == "SchedulerProfile/batch"
    assert weighted(profile) == DEFAULT_SCORE


def test_scheduler_name_and_scalars_are_taken_from_the_spec():
    profile = parse({"schedulerName": "fast", "percentageOfNodesToScore": 30,
                     "podInitialBackoffSeconds": 2, "podMaxBackoffSeconds": 20})
    assert (profile.scheduler_name, profile.percentage_of_nodes_to_score, profile.pod_initial_backoff_seconds,
            profile.pod_max_backoff_seconds) == ("fast", 30, 2, 20)


@pytest.mark.parametrize(("plugins", "point", "expected"), [
    pytest.param({"multiPoint": {"enabled": [{"name": "MyPlugin"}]}}, "preFilter",
                 ["NodeAffinity", "NodePorts", "NodeResourcesFit", "VolumeRestrictions", "NodeVolumeLimits",
                  "VolumeZone", "PodTopologySpread", "InterPodAffinity", "NodeDeclaredFeatures", "MyPlugin"],
                 id="multipoint-custom-appended-at-prefilter"),
    pytest.param({"multiPoint": {"enabled": [{"name": "MyPlugin"}]}}, "score",
                 [*DEFAULT_SCORE, ("MyPlugin", 1)], id="multipoint-custom-scores-with-weight-1"),
    pytest.param({"multiPoint": {"enabled": [{"name": "MyPlugin", "weight": 4}]}}, "score",
                 [*DEFAULT_SCORE, ("MyPlugin", 4)], id="multipoint-custom-weight"),
    pytest.param({"multiPoint": {"enabled": [{"name": "MyPlugin"}]}}, "postFilter",
                 ["DefaultPreemption"], id="multipoint-custom-not-where-it-does-not-implement"),
    pytest.param({"multiPoint": {"enabled": [{"name": "TaintToleration", "weight": 7}]}}, "score",
                 [("TaintToleration", 7), *DEFAULT_SCORE[1:]], id="multipoint-reconfigured-default-keeps-place"),
    pytest.param({"multiPoint": {"enabled": [{"name": "ImageLocality", "weight": 9}]}}, "score",
                 [*DEFAULT_SCORE[:-1], ("ImageLocality", 9)], id="multipoint-reconfigured-last-default-keeps-place"),
    pytest.param({"score": {"enabled": [{"name": "NodeResourcesFit", "weight": 5}]}}, "score",
                 [("NodeResourcesFit", 5), *(e for e in DEFAULT_SCORE if e[0] != "NodeResourcesFit")],
                 id="score-point-override-runs-first"),
    pytest.param({"score": {"enabled": [{"name": "TaintToleration"}]}}, "score",
                 [("TaintToleration", 1), *DEFAULT_SCORE[1:]], id="score-point-entry-without-weight-means-1"),
    pytest.param({"score": {"disabled": [{"name": "*"}]}}, "score", [], id="star-disables-all-scores"),
    pytest.param({"score": {"disabled": [{"name": "*"}], "enabled": [{"name": "ImageLocality", "weight": 3}]}},
                 "score", [("ImageLocality", 3)], id="star-then-enable-one"),
    pytest.param({"score": {"disabled": [{"name": "*"}]}}, "preScore",
                 [("TaintToleration", None), ("NodeAffinity", None), ("NodeResourcesFit", None),
                  ("PodTopologySpread", None), ("InterPodAffinity", None), ("NodeResourcesBalancedAllocation", None)],
                 id="star-at-score-leaves-prescore"),
    pytest.param({"score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}]}}, "score",
                 [e for e in DEFAULT_SCORE if e[0] != "NodeResourcesBalancedAllocation"], id="disable-one-default"),
    pytest.param({"multiPoint": {"disabled": [{"name": "TaintToleration"}]}}, "filter",
                 [("NodeName", None), ("NodeUnschedulable", None), ("NodeAffinity", None), ("NodePorts", None),
                  ("NodeResourcesFit", None), ("VolumeRestrictions", None), ("NodeVolumeLimits", None),
                  ("VolumeZone", None), ("PodTopologySpread", None), ("InterPodAffinity", None),
                  ("NodeDeclaredFeatures", None)],
                 id="multipoint-disable-removes-everywhere"),
    pytest.param({"filter": {"enabled": [{"name": "MyPlugin"}]}}, "filter",
                 [("NodeName", None), ("NodeUnschedulable", None), ("TaintToleration", None), ("NodeAffinity", None),
                  ("NodePorts", None), ("NodeResourcesFit", None), ("VolumeRestrictions", None),
                  ("NodeVolumeLimits", None), ("VolumeZone", None), ("PodTopologySpread", None),
                  ("InterPodAffinity", None), ("NodeDeclaredFeatures", None), ("MyPlugin", None)],
                 id="specific-custom-appended-after-multipoint"),
    pytest.param({"queueSort": {"enabled": [{"name": "OtherSort"}], "disabled": [{"name": "*"}]}}, "queueSort",
                 [("OtherSort", None)], id="replace-queue-sort"),
    pytest.param({"bind": {"enabled": [{"name": "OtherBinder"}]}}, "bind",
                 [("DefaultBinder", None), ("OtherBinder", None)], id="second-binder-after-default"),
    pytest.param({"bind": {"enabled": [{"name": "OtherBinder"}, {"name": "DefaultBinder"}]}}, "bind",
                 [("DefaultBinder", None), ("OtherBinder", None)], id="override-first-then-others"),
    pytest.param({"multiPoint": {"enabled": [{"name": "OtherBinder"}], "disabled": [{"name": "*"}]},
                  "queueSort": {"enabled": [{"name": "PrioritySort"}]}}, "bind",
                 [("OtherBinder", None)], id="multipoint-star-disables-every-default"),
])
def test_merge_and_expansion(plugins, point, expected):
    profile = parse({"plugins": plugins})
    got = weighted(profile, point)
    if expected and not isinstance(expected[0], tuple):
        got = [name for name, _ in got]
    assert got == expected


def test_multipoint_star_keeps_only_what_is_enabled():
    profile = parse({"plugins": {"multiPoint": {"enabled": [{"name": "PrioritySort"}, {"name": "DefaultBinder"}],
                                                "disabled": [{"name": "*"}]}}})
    assert profile.plugin_names() == ["PrioritySort", "DefaultBinder"]


def test_plugin_config_is_decoded_and_defaults_fill_the_rest():
    profile = parse({"pluginConfig": [{"name": "NodeResourcesFit", "args": {"level": 42}}]})
    assert profile.plugin_args["NodeResourcesFit"].level == 42
    assert profile.plugin_args["PrioritySort"].level == 10
    assert profile.plugin_args["TaintToleration"] is None


def test_plugin_config_of_a_disabled_plugin_is_validated_but_not_kept():
    profile = parse({"plugins": {"multiPoint": {"disabled": [{"name": "NodeResourcesFit"}]}},
                     "pluginConfig": [{"name": "NodeResourcesFit", "args": {"level": 5}}]})
    assert "NodeResourcesFit" not in profile.plugin_args


def test_dynamic_resources_may_be_disabled_and_configured_as_upstream():
    from kopfsched.plugins.registry import in_tree_registry

    spec = {"plugins": {"multiPoint": {"disabled": [{"name": "DynamicResources"}]}},
            "pluginConfig": [{"name": "DynamicResources", "args": {"filterTimeout": "10s"}}]}
    profile, problems = parse_scheduler_profile(scheduler_profile(spec), in_tree_registry())
    assert problems == []
    assert "DynamicResources" not in profile.plugin_names()
    default, _ = parse_scheduler_profile(scheduler_profile({}), in_tree_registry())
    assert default.enabled("postFilter") == ["DynamicResources", "DefaultPreemption"]

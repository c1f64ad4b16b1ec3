"""Extender configuration: upstream's checks with field paths, defaults, and where extenders go."""

from __future__ import annotations

from typing import Any

import pytest

from kopfsched.config.parse import parse_kube_scheduler_configuration, parse_scheduler_profile
from kopfsched.config.types import ExtenderConfig, ExtenderManagedResource
from kopfsched.plugins.registry import in_tree_registry

URL = "http://127.0.0.1:8888"


def ksc(extenders: Any, profiles: list[dict] | None = None) -> dict[str, Any]:
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "extenders": extenders, "profiles": profiles or [{"schedulerName": "a"}, {"schedulerName": "b"}]}


def scheduler_profile(extenders: Any) -> dict[str, Any]:
    return {"apiVersion": "kopfsched.dev/v1alpha1", "kind": "SchedulerProfile", "metadata": {"name": "p"},
            "spec": {"extenders": extenders}}


@pytest.mark.parametrize("extenders, problems", [
    pytest.param([{"filterVerb": "filter"}], ["extenders[0].urlPrefix: required"], id="url-required"),
    pytest.param([{"urlPrefix": "ftp://x"}], ['extenders[0].urlPrefix: Invalid value: "ftp://x": must be an http:// or '
                                              "https:// URL"], id="url-scheme"),
    pytest.param([{"urlPrefix": URL, "prioritizeVerb": "p", "weight": 0}],
                 ["extenders[0].weight: must have a positive weight applied to it"], id="weight"),
    pytest.param([{"urlPrefix": URL, "bindVerb": "b"}, {"urlPrefix": URL + "/2", "bindVerb": "b"}],
                 ["extenders: only one extender can implement bind, found 2"], id="one-binder"),
    pytest.param([{"urlPrefix": URL, "managedResources": [{"name": "cpu"}]}],
                 ['extenders[0].managedResources[0].name: Invalid value: "cpu": is an invalid extended resource name'],
                 id="not-extended"),
    pytest.param([{"urlPrefix": URL, "managedResources": [{"name": "example.com/foo"}]},
                  {"urlPrefix": URL + "/2", "managedResources": [{"name": "example.com/foo"}]}],
                 ['extenders[1].managedResources[0].name: Invalid value: "example.com/foo": duplicate extender '
                  "managed resource name"], id="duplicate-resource"),
    pytest.param([{"urlPrefix": URL, "httpTimeout": "soon"}],
                 ["extenders[0].httpTimeout: must be a duration such as \"5s\", got 'soon'"], id="timeout"),
    pytest.param([{"urlPrefix": URL, "tlsConfig": {"caData": "%%%"}}],
                 ["extenders[0].tlsConfig.caData: must be a base64 string"], id="tls-data"),
    pytest.param([{"urlPrefix": URL, "filterverb": "f"}], ["extenders[0].filterverb: unknown field"], id="typo"),
])
def test_problems_have_field_paths(extenders, problems):
    config, found = parse_kube_scheduler_configuration(ksc(extenders), in_tree_registry())
    assert (config, [str(p) for p in found]) == (None, problems)
    profile, found = parse_scheduler_profile(scheduler_profile(extenders), in_tree_registry())
    assert (profile, [str(p) for p in found]) == (None, [f"spec.{p}" for p in problems])


@pytest.mark.parametrize("timeout, seconds", [
    pytest.param(None, 5.0, id="default"), pytest.param("0s", 5.0, id="zero-means-default"),
    pytest.param("200ms", 0.2, id="set"),
])
def test_defaults(timeout, seconds):
    raw = {"urlPrefix": URL, "filterVerb": "filter", "httpTimeout": timeout}
    profile, problems = parse_scheduler_profile(scheduler_profile([raw]), in_tree_registry())
    assert problems == []
    assert profile.extenders == (ExtenderConfig(url_prefix=URL, filter_verb="filter", http_timeout_seconds=seconds),)


def test_configuration_extenders_serve_every_profile_and_ignored_resources_reach_node_resources_fit():
    raw = {"urlPrefix": URL, "managedResources": [{"name": "example.com/foo", "ignoredByScheduler": True},
                                                  {"name": "example.com/bar"}]}
    config, problems = parse_kube_scheduler_configuration(ksc([raw]), in_tree_registry())
    assert problems == []
    expected = ExtenderConfig(url_prefix=URL, managed_resources=(
        ExtenderManagedResource("example.com/foo", True), ExtenderManagedResource("example.com/bar")))
    assert config.extenders == [expected]
    for profile in config.profiles:
        assert profile.extenders == (expected,)
        assert profile.plugin_args["NodeResourcesFit"].ignored_resources == ("example.com/foo",)

"""KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) parsing."""

from __future__ import annotations

from typing import Any

import pytest

from kopfsched.config import LeaderElectionConfig, parse_kube_scheduler_configuration
from tests.config.fakes import fake_registry


def ksc(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration", **fields}


def parse(obj: dict[str, Any]):
    config, problems = parse_kube_scheduler_configuration(obj, fake_registry())
    assert problems == []
    assert config is not None
    return config


def test_minimal_configuration_gets_upstream_defaults_and_one_default_profile():
    config = parse(ksc(clientConnection={"kubeconfig": "/etc/kubeconfig"}))
    assert (config.parallelism, config.percentage_of_nodes_to_score, config.pod_initial_backoff_seconds,
            config.pod_max_backoff_seconds, config.leader_election, config.extenders) == (
        16, 0, 1, 10, LeaderElectionConfig(), [])
    [profile] = config.profiles
    assert (profile.scheduler_name, profile.source) == ("default-scheduler", "KubeSchedulerConfiguration profiles[0]")
    assert profile.enabled("bind") == ["DefaultBinder"]


def test_global_backoff_reaches_every_profile_and_profile_percentage_stays_its_own():
    config = parse(ksc(podInitialBackoffSeconds=2, podMaxBackoffSeconds=60, percentageOfNodesToScore=40,
                       profiles=[{"schedulerName": "a", "percentageOfNodesToScore": 10}, {"schedulerName": "b"}]))
    assert [(p.scheduler_name, p.pod_initial_backoff_seconds, p.pod_max_backoff_seconds,
             p.percentage_of_nodes_to_score) for p in config.profiles] == [("a", 2, 60, 10), ("b", 2, 60, None)]
    assert config.percentage_of_nodes_to_score == 40


def test_leader_election_durations():
    config = parse(ksc(leaderElection={"leaderElect": False, "leaseDuration": "1m30s", "renewDeadline": "500ms",
                                       "retryPeriod": "0.25s", "resourceName": "kopfsched"}))
    assert config.leader_election == LeaderElectionConfig(
        leader_elect=False, lease_duration_seconds=90.0, renew_deadline_seconds=0.5, retry_period_seconds=0.25,
        resource_name="kopfsched")


def test_no_scoring_profile_from_upstream_docs():
    config = parse(ksc(profiles=[
        {"schedulerName": "default-scheduler"},
        {"schedulerName": "no-scoring-scheduler",
         "plugins": {"preScore": {"disabled": [{"name": "*"}]}, "score": {"disabled": [{"name": "*"}]}}},
    ]))
    assert [p.enabled("score") for p in config.profiles][1] == []
    assert config.profiles[1].enabled("filter") == config.profiles[0].enabled("filter")


@pytest.mark.parametrize(("fields", "expected"), [
    pytest.param({"profiles": [{}, {"schedulerName": "b"}]}, ["profiles[0].schedulerName: required"],
                 id="unnamed-profile-among-several"),
    pytest.param({"profiles": [{"schedulerName": "a"}, {"schedulerName": "a"}]},
                 ['profiles[1].schedulerName: scheduler name "a" is also used by KubeSchedulerConfiguration'
                  " profiles[0]"], id="duplicate-names"),
    pytest.param({"profiles": [{"schedulerName": "a"}, {"schedulerName": "b", "plugins": {
        "queueSort": {"enabled": [{"name": "OtherSort"}], "disabled": [{"name": "*"}]}}}]},
                 ['profiles[1].plugins.queueSort: queueSort must be the same for all profiles: "OtherSort" here,'
                  ' "PrioritySort" in KubeSchedulerConfiguration profiles[0]'], id="queue-sort-differs"),
    pytest.param({"profiles": [{"plugins": {"score": {"enabled": [{"name": "Foo"}]}}}]},
                 ['profiles[0].plugins.score.enabled[0].name: unknown plugin "Foo": neither built in nor installed'],
                 id="profile-problem-path"),
    pytest.param({"profiles": [{"podMaxBackoffSeconds": 3}]}, ["profiles[0].podMaxBackoffSeconds: unknown field"],
                 id="backoff-is-global-in-ksc"),
    pytest.param({"parallelism": 0}, ["parallelism: should be an integer value greater than zero, got 0"],
                 id="parallelism"),
    pytest.param({"percentageOfNodesToScore": 150}, ["percentageOfNodesToScore: not in valid range [0-100], got 150"],
                 id="percentage"),
    pytest.param({"podInitialBackoffSeconds": 4, "podMaxBackoffSeconds": 3},
                 ["podMaxBackoffSeconds: must be greater than or equal to podInitialBackoffSeconds (4), got 3"],
                 id="backoff"),
    pytest.param({"leaderElection": {"leaseDuration": "10s", "renewDeadline": "10s"}},
                 ["leaderElection.leaseDuration: LeaseDuration must be greater than RenewDeadline"], id="lease"),
    pytest.param({"leaderElection": {"retryPeriod": "soon"}},
                 ["leaderElection.retryPeriod: must be a duration such as \"15s\", got 'soon'"], id="duration"),
    pytest.param({"leaderElection": {"resourceLock": "endpoints"}},
                 ["leaderElection.resourceLock: resourceLock value must be \"leases\", got 'endpoints'"], id="lock"),
    pytest.param({"extenders": [{"urlPrefix": "http://x", "prioritizeVerb": "prioritize"}]},
                 ["extenders[0].weight: must have a positive weight applied to it"], id="extender-weight"),
    pytest.param({"extenders": [{"urlPrefix": "http://a", "bindVerb": "bind"},
                                {"urlPrefix": "http://b", "bindVerb": "bind"}]},
                 ["extenders: only one extender can implement bind, found 2"], id="extender-binders"),
    pytest.param({"profiles": {"schedulerName": "a"}}, ["profiles: must be an array, got object"],
                 id="profiles-not-a-list"),
    pytest.param({"percentageOfNodesToScroe": 5}, ["percentageOfNodesToScroe: unknown field"], id="unknown-field"),
])
def test_problem(fields, expected):
    config, problems = parse_kube_scheduler_configuration(ksc(**fields), fake_registry())
    assert config is None
    assert [str(problem) for problem in problems] == expected


def test_wrong_api_version():
    obj = ksc()
    obj["apiVersion"] = "kubescheduler.config.k8s.io/v1beta3"
    _, problems = parse_kube_scheduler_configuration(obj, fake_registry())
    assert [str(p) for p in problems] == [
        "apiVersion: must be \"kubescheduler.config.k8s.io/v1\", got 'kubescheduler.config.k8s.io/v1beta3'"]

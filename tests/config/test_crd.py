"""The SchedulerProfile CRD and the example profiles: the examples satisfy the CRD's own
schema and parse without problems; the schema rejects what validation rejects."""

from __future__ import annotations

import pathlib
from typing import Any

import jsonschema
import pytest
import yaml

from kopfsched.config import parse_scheduler_profile
from kopfsched.framework.registry import Registry
from tests.config.fakes import every_in_tree_plugin, scheduler_profile
from tests.crd_schema import crd_json_schema

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRD = yaml.safe_load((ROOT / "crds" / "schedulerprofile.yaml").read_text())
EXAMPLES = sorted((ROOT / "examples" / "profiles").glob("*.yaml"))


def schema_errors(obj: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft7Validator(crd_json_schema(CRD), format_checker=jsonschema.FormatChecker())
    errors = validator.iter_errors(obj)
    return sorted(".".join(map(str, error.absolute_path)) + ": " + error.message for error in errors)


def test_crd_identity():
    spec = CRD["spec"]
    assert (CRD["apiVersion"], CRD["metadata"]["name"], spec["group"], spec["scope"]) == (
        "apiextensions.k8s.io/v1", "schedulerprofiles.kopfsched.dev", "kopfsched.dev", "Cluster")
    assert (spec["names"]["plural"], spec["names"]["kind"], spec["names"]["shortNames"]) == (
        "schedulerprofiles", "SchedulerProfile", ["sp"])
    [version] = spec["versions"]
    assert (version["name"], version["served"], version["storage"], version["subresources"]) == (
        "v1alpha1", True, True, {"status": {}})
    assert [(c["name"], c["jsonPath"]) for c in version["additionalPrinterColumns"]] == [
        ("Scheduler", ".status.schedulerName"),
        ("Ready", '.status.conditions[?(@.type=="Ready")].status'),
        ("Scheduled", ".status.counters.scheduled"),
        ("Pending", ".status.queue.pending"),
        ("Age", ".metadata.creationTimestamp"),
    ]


def test_there_are_examples():
    assert {path.name for path in EXAMPLES} >= {"bin-packing.yaml", "no-scoring.yaml"}


@pytest.fixture(scope="module")
def registry() -> Registry:
    return every_in_tree_plugin()


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.stem)
def test_example_matches_the_crd_schema_and_parses(path, registry):
    for obj in yaml.safe_load_all(path.read_text()):
        assert schema_errors(obj) == []
        profile, problems = parse_scheduler_profile(obj, registry)
        assert [str(p) for p in problems] == []
        assert profile is not None


def test_bin_packing_example_uses_most_allocated(registry):
    obj = yaml.safe_load((ROOT / "examples" / "profiles" / "bin-packing.yaml").read_text())
    profile, _ = parse_scheduler_profile(obj, registry)
    assert profile is not None
    strategy = profile.plugin_args["NodeResourcesFit"].scoring_strategy
    assert (strategy.type, [(r.name, r.weight) for r in strategy.resources]) == ("MostAllocated",
                                                                                 [("cpu", 2), ("memory", 1)])
    assert profile.score_weights()["NodeResourcesFit"] == 5
    assert "NodeResourcesBalancedAllocation" not in profile.enabled("score")


@pytest.mark.parametrize(("spec", "expected"), [
    pytest.param({"percentageOfNodesToScore": 101},
                 ["spec.percentageOfNodesToScore: 101 is greater than the maximum of 100"], id="percentage"),
    pytest.param({"plugins": {"score": {"enabled": [{"name": "ImageLocality", "weight": 0}]}}},
                 ["spec.plugins.score.enabled.0.weight: 0 is less than the minimum of 1"], id="weight"),
    pytest.param({"plugins": {"score": {"enabled": "ImageLocality"}}},
                 ["spec.plugins.score.enabled: 'ImageLocality' is not of type 'array'"], id="enabled-not-list"),
    pytest.param({"pluginConfig": [{"args": {}}]}, ["spec.pluginConfig.0: 'name' is a required property"],
                 id="config-name"),
])
def test_schema_rejects(spec, expected):
    assert schema_errors(scheduler_profile(spec)) == expected


def test_status_schema_accepts_what_the_scheduler_writes():
    obj = scheduler_profile({})
    obj["status"] = {
        "observedGeneration": 3,
        "conditions": [{"type": "Ready", "status": "True", "reason": "Valid", "message": "serving",
                        "lastTransitionTime": "2025-01-01T00:00:00Z", "observedGeneration": 3}],
        "plugins": {"score": [{"name": "NodeResourcesFit", "weight": 1}], "bind": [{"name": "DefaultBinder"}]},
        "queue": {"active": 1, "backoff": 2, "unschedulable": 3, "gated": 0, "pending": 6},
        "counters": {"scheduled": 10, "unschedulable": 2, "preemptions": 0, "errors": 0},
        "lastScheduleTime": "2025-01-01T00:00:01Z",
        "latency": {"p50Ms": 1.5, "p99Ms": 12.0},
    }
    assert schema_errors(obj) == []


def test_crd_is_a_valid_kubernetes_object():
    import kubernetes_validate  # a declared test dependency: missing, the test fails

    kubernetes_validate.validate(CRD, "1.33", strict=True)

"""SchedulerProfiles the API server refuses at admission (crds/schedulerprofile.yaml: schema
constraints and x-kubernetes-validations CEL rules), each with the field the refusal names.

One table for three tests: tests/config/test_admission_rules.py proves that `kopfsched validate`
(config/parse.py through config/schema.py) refuses each at that field too, and evaluates the CEL
rules on them; tests/cluster/test_admission.py `kubectl apply`s each against the real
kube-apiserver and reads the field and message in kubectl's error."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Refused:
    id: str
    spec: dict[str, Any]
    field: str
    """The path the API server's error names (and where `kopfsched validate` reports a problem)."""
    api_message: str
    """What kube-apiserver says about it (a fragment of kubectl's error line)."""
    cel: bool = False
    """Refused by a CEL rule (else by the structural schema)."""


def enabled(*names: str, weight: int | None = None) -> dict[str, Any]:
    return {"enabled": [{"name": name} | ({"weight": weight} if weight is not None else {}) for name in names]}


QUEUE_SORT_MESSAGE = ("only one queue sort plugin can be enabled: disable PrioritySort (in queueSort.disabled or "
                      "multiPoint.disabled) to enable another")
BINDER = {"urlPrefix": "http://extender.example:8888", "bindVerb": "bind"}

REFUSED = [
    Refused("two-queue-sorts-listed", {"plugins": {"queueSort": {**enabled("PrioritySort", "QOSSort"),
                                                                 "disabled": [{"name": "*"}]}}},
            "spec.plugins.queueSort.enabled", "Too many: 2: must have at most 1 item"),
    Refused("a-queue-sort-beside-the-default", {"plugins": {"queueSort": enabled("QOSSort")}},
            "spec.plugins.queueSort", QUEUE_SORT_MESSAGE, cel=True),
    Refused("a-queue-sort-beside-the-re-enabled-default",
            {"plugins": {"multiPoint": {"enabled": [{"name": "PrioritySort"}], "disabled": [{"name": "*"}]},
                         "queueSort": enabled("QOSSort")}},
            "spec.plugins.queueSort", QUEUE_SORT_MESSAGE, cel=True),
    Refused("every-queue-sort-disabled", {"plugins": {"queueSort": {"disabled": [{"name": "*"}]}}},
            "spec.plugins.queueSort",
            'no queue sort plugin is enabled: queueSort.disabled has "*", so queueSort.enabled must name one',
            cel=True),
    Refused("every-binder-disabled", {"plugins": {"bind": {"disabled": [{"name": "*"}]}}},
            "spec.plugins.bind",
            'at least one bind plugin is needed: bind.disabled has "*", so bind.enabled must name one', cel=True),
    Refused("weight-zero", {"plugins": {"score": enabled("ImageLocality", weight=0)}},
            "spec.plugins.score.enabled[0].weight", "should be greater than or equal to 1"),
    Refused("weight-negative", {"plugins": {"multiPoint": enabled("ImageLocality", weight=-3)}},
            "spec.plugins.multiPoint.enabled[0].weight", "should be greater than or equal to 1"),
    Refused("unknown-extension-point", {"plugins": {"scoring": enabled("ImageLocality")}},
            "spec.plugins.scoring", 'unknown field "spec.plugins.scoring"'),
    Refused("wildcard-enabled", {"plugins": {"filter": enabled("*")}},
            "spec.plugins.filter.enabled[0].name", "should match"),
    Refused("name-with-a-space", {"plugins": {"filter": enabled("Node Name")}},
            "spec.plugins.filter.enabled[0].name", "should match"),
    Refused("name-of-a-module-attribute", {"plugins": {"filter": enabled("my.module:Plugin")}},
            "spec.plugins.filter.enabled[0].name", "should match"),
    Refused("malformed-disabled-name", {"plugins": {"score": {"disabled": [{"name": "-ImageLocality"}]}}},
            "spec.plugins.score.disabled[0].name", "should match"),
    Refused("malformed-plugin-config-name", {"pluginConfig": [{"name": "Node Resources Fit", "args": {}}]},
            "spec.pluginConfig[0].name", "should match"),
    Refused("name-too-long", {"plugins": {"filter": enabled("P" * 254)}},
            "spec.plugins.filter.enabled[0].name", "may not be more than 253 bytes"),
    Refused("enabled-twice", {"plugins": {"filter": enabled("NodeName", "NodeName")}},
            "spec.plugins.filter.enabled[1]", "Duplicate value"),
    Refused("disabled-twice",
            {"plugins": {"score": {"disabled": [{"name": "ImageLocality"}, {"name": "ImageLocality"}]}}},
            "spec.plugins.score.disabled[1]", "Duplicate value"),
    Refused("configured-twice", {"pluginConfig": [{"name": "NodeResourcesFit", "args": {}},
                                                  {"name": "NodeResourcesFit", "args": {}}]},
            "spec.pluginConfig[1]", "Duplicate value"),
    Refused("backoff-max-below-initial", {"podInitialBackoffSeconds": 5, "podMaxBackoffSeconds": 2},
            "spec.podMaxBackoffSeconds", "must be greater than or equal to podInitialBackoffSeconds", cel=True),
    Refused("backoff-initial-above-the-default-max", {"podInitialBackoffSeconds": 20},
            "spec.podMaxBackoffSeconds", "must be greater than or equal to podInitialBackoffSeconds", cel=True),
    Refused("backoff-zero", {"podInitialBackoffSeconds": 0},
            "spec.podInitialBackoffSeconds", "should be greater than or equal to 1"),
    Refused("percentage-over-100", {"percentageOfNodesToScore": 101},
            "spec.percentageOfNodesToScore", "should be less than or equal to 100"),
    Refused("empty-scheduler-name", {"schedulerName": ""},
            "spec.schedulerName", "should be at least 1 chars long"),
    Refused("two-binding-extenders", {"extenders": [BINDER, {**BINDER, "urlPrefix": "http://other.example:8888"}]},
            "spec.extenders", "only one extender can implement bind", cel=True),
    Refused("a-prioritizer-without-weight",
            {"extenders": [{"urlPrefix": "http://extender.example:8888", "prioritizeVerb": "prioritize"}]},
            "spec.extenders[0].weight", "must have a positive weight applied to it", cel=True),
]

ACCEPTED = [
    ("defaults", {}),
    ("queue-sort-replaced", {"plugins": {"queueSort": {"enabled": [{"name": "PrioritySort"}]}}}),
    ("every-default-disabled-and-listed-again", {"plugins": {
        "multiPoint": {"disabled": [{"name": "*"}], "enabled": [{"name": "PrioritySort"}, {"name": "DefaultBinder"},
                                                                {"name": "NodeResourcesFit", "weight": 2}]}}}),
    ("binder-replaced", {"plugins": {"bind": {"disabled": [{"name": "*"}], "enabled": [{"name": "DefaultBinder"}]}}}),
    ("backoff-in-order", {"podInitialBackoffSeconds": 2, "podMaxBackoffSeconds": 2}),
    ("one-binding-extender", {"extenders": [BINDER, {"urlPrefix": "http://s.example", "prioritizeVerb": "p",
                                                     "weight": 3}]}),
]


def profile(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "kopfsched.dev/v1alpha1", "kind": "SchedulerProfile", "metadata": {"name": name},
            "spec": spec}

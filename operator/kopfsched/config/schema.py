"""The structure of a profile, checked against the SchedulerProfile CRD's openAPIV3Schema.

One source of truth: the schema the API server enforces is the schema `kopfsched validate`,
`simulate` and the operator check, so a field's type, range or presence is written once, in
crds/schedulerprofile.yaml. The package ships a copy of that file as package data
(kopfsched/config/crds/schedulerprofile.yaml) because an installed kopfsched has no repository
around it; tests/config/test_schema.py fails when the copy and crds/ differ, so they cannot
drift. What no schema can say (upstream's merge of multiPoint with the defaults, plugin names
and the points they implement, plugin args, backoff order, extender semantics, rules across
profiles) stays in Python (parse.py, extenders.py, field_checks.py).

A KubeSchedulerConfiguration's profiles have the same KubeSchedulerProfile shape as a
SchedulerProfile's spec, so they are checked against the spec's schema restricted to the
profile fields, and its `extenders` against the spec's `extenders` schema.
"""

from __future__ import annotations

import base64
import binascii
import copy
import functools
from collections.abc import Iterable
from importlib import resources
from typing import Any

import jsonschema
import yaml

from kopfsched.config.types import Problem

CRD_RESOURCE = "crds/schedulerprofile.yaml"
PROFILE_FIELDS = ("schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig")
"""The KubeSchedulerProfile fields of a SchedulerProfile's spec (the rest is kopfsched's own)."""

_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}


def type_name(value: Any) -> str:
    """The JSON name of a value's type, for messages."""
    if value is None:
        return "null"
    for python_type, name in _JSON_TYPES.items():
        if isinstance(value, python_type):
            return name
    return type(value).__name__


def load_crd() -> dict[str, Any]:
    """The CRD shipped with the package."""
    text = resources.files("kopfsched.config").joinpath(CRD_RESOURCE).read_text(encoding="utf-8")
    # libyaml's loader when present: PyYAML's pure-Python one took a third of a second here,
    # on every offline run.
    crd: dict[str, Any] = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return crd


def json_schema(node: Any) -> Any:
    """An OpenAPI v3 structural schema as JSON Schema, with the API server's strictness.

    The API server drops unknown fields of a structural schema (and rejects them with strict
    field validation, which `kubectl apply` asks for); upstream decodes configuration files
    strictly too. So every object that lists its properties and does not preserve unknown
    fields gets `additionalProperties: false`. The x-kubernetes-* extensions jsonschema does
    not know are dropped."""
    if isinstance(node, list):
        return [json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {key: json_schema(value) for key, value in node.items() if not key.startswith("x-kubernetes-")}
    if "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields"):
        converted.setdefault("additionalProperties", False)
    return converted


FORMATS = jsonschema.FormatChecker(formats=())
"""The string formats the API server checks that the CRD uses. (int32/int64 are storage
hints the API server does not check; where a range matters the schema says minimum/maximum.)"""


@FORMATS.checks("byte")
def _is_base64(value: object) -> bool:
    if not isinstance(value, str):
        return True  # the type keyword reports it
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


@functools.cache
def spec_schema() -> dict[str, Any]:
    """The JSON Schema of a SchedulerProfile's spec."""
    schema = json_schema(load_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    spec: dict[str, Any] = schema["properties"]["spec"]
    return spec


@functools.cache
def _validator(part: str) -> jsonschema.protocols.Validator:
    spec = spec_schema()
    if part == "spec":
        schema = spec
    elif part == "profile":
        schema = copy.deepcopy(spec)
        schema["properties"] = {key: schema["properties"][key] for key in PROFILE_FIELDS}
    else:
        schema = spec["properties"][part]
    validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    validator: jsonschema.protocols.Validator = validator_class(schema, format_checker=FORMATS)
    return validator


def reload_schema() -> None:
    """Forget the schema and validators read so far: the next check reads `load_crd()` again."""
    spec_schema.cache_clear()
    _validator.cache_clear()


def check_spec(spec: Any, path: str = "spec") -> tuple[list[Problem], Any]:
    """Structural problems of a SchedulerProfile spec, and the spec without the wrong parts."""
    return _check(_validator("spec"), spec, path)


def check_profile(profile: Any, path: str) -> tuple[list[Problem], Any]:
    """The same for one KubeSchedulerConfiguration profile."""
    return _check(_validator("profile"), profile, path)


def check_extenders(extenders: Any, path: str) -> tuple[list[Problem], Any]:
    """The same for an extenders list (a KubeSchedulerConfiguration's)."""
    return _check(_validator("extenders"), extenders, path)


def _check(validator: jsonschema.protocols.Validator, instance: Any, path: str) -> tuple[list[Problem], Any]:
    """(problems, the instance with every wrong part pruned, or None when the whole is wrong).

    Problems come in the schema's order of fields (deterministic: the CRD's reading order).
    The pruned copy lets the semantic checks still run on the parts that are right, so the
    user sees every problem at once: a wrong field is removed, a wrong list item becomes None
    (the semantic checks skip it, and the other items keep their index for messages)."""
    instance = _without_nulls(instance)
    errors = list(validator.iter_errors(instance))
    problems = [problem for error in errors for problem in _describe(error, path)]
    pruned = instance
    # Removing a wrong field can leave its object without a required field: prune again
    # until what is left is valid (each round removes something, and nesting is shallow).
    for _ in range(_MAX_PRUNE_ROUNDS):
        if not errors:
            return problems, pruned
        pruned = _pruned(pruned, errors)
        if pruned is None:
            return problems, None
        # A None list item is one already pruned (or reported as null in the first round).
        errors = [error for error in validator.iter_errors(pruned) if error.instance is not None]
    return problems, None


_MAX_PRUNE_ROUNDS = 8


def _pruned(instance: Any, errors: list[jsonschema.ValidationError]) -> Any:
    """A copy of `instance` without the parts `errors` are about (None for all of it)."""
    pruned = copy.deepcopy(instance)
    for error in errors:
        where = list(error.absolute_path)
        if error.validator == "additionalProperties":
            known: Any = error.schema
            given: Any = error.instance
            parent, unknown = _child_at(pruned, where), set(given) - set(known.get("properties", {}))
            if isinstance(parent, dict):
                for key in unknown:
                    parent.pop(key, None)
            continue
        if not where:
            return None
        parent = _child_at(pruned, where[:-1])
        if isinstance(parent, list) and isinstance(where[-1], int) and where[-1] < len(parent):
            parent[where[-1]] = None
        elif isinstance(parent, dict):
            parent.pop(where[-1], None)
    return pruned


def _child_at(node: Any, where: list[Any]) -> Any:
    for part in where:
        node = _child(node, part)
    return node


def _without_nulls(node: Any) -> Any:
    """The API server drops a null field of a non-nullable schema before validating it, and
    upstream's decoder treats one as absent: so do we (null list items stay, and are wrong)."""
    if isinstance(node, dict):
        return {key: _without_nulls(value) for key, value in node.items() if value is not None}
    if isinstance(node, list):
        return [_without_nulls(value) for value in node]
    return node


def _child(node: Any, part: Any) -> Any:
    """The child at `part`, or None when an earlier prune removed it."""
    if isinstance(node, dict):
        return node.get(part)
    if isinstance(node, list) and isinstance(part, int) and part < len(node):
        return node[part]
    return None


def field_path(base: str, parts: Iterable[Any]) -> str:
    """`field_path("spec", ["plugins", "score", "enabled", 0, "weight"])` →
    "spec.plugins.score.enabled[0].weight"."""
    path = base
    for part in parts:
        path = f"{path}[{part}]" if isinstance(part, int) else f"{path}.{part}" if path else str(part)
    return path


def _describe(error: jsonschema.ValidationError, base: str) -> list[Problem]:
    """One problem per thing wrong, in kopfsched's words, at kopfsched's path syntax. The
    wording follows the schema keyword, so it changes with the schema."""
    path = field_path(base, error.absolute_path)
    value, keyword = error.instance, error.validator
    expected: Any = error.validator_value
    schema: Any = error.schema
    if keyword == "additionalProperties" and isinstance(value, dict):
        known = schema.get("properties", {})
        return [Problem(field_path(path, [key]), "unknown field") for key in value if key not in known]
    if keyword == "required" and isinstance(value, dict):
        return [Problem(field_path(path, [key]), "required") for key in expected if key not in value]
    if keyword == "type":
        return [Problem(path, f"must be {_article(expected)}, got {type_name(value)}")]
    if keyword == "minLength" and expected == 1 and value == "":
        return [Problem(path, "required")]
    if keyword == "minimum":
        return [Problem(path, f"must be at least {expected}, got {value}")]
    if keyword == "maximum":
        return [Problem(path, f"must be at most {expected}, got {value}")]
    if keyword == "enum":
        return [Problem(path, f"must be one of {', '.join(map(repr, expected))}, got {value!r}")]
    if keyword == "format" and expected == "byte":
        return [Problem(path, "must be a base64 string")]
    if keyword == "maxItems" and isinstance(value, list):
        return [Problem(path, f"must have at most {expected} item{'s' if expected != 1 else ''}, got {len(value)}")]
    if keyword == "maxLength" and isinstance(value, str):
        return [Problem(path, f"must be at most {expected} characters, got {len(value)}")]
    if keyword == "pattern" and expected in (PLUGIN_NAME, PLUGIN_NAME_OR_WILDCARD):
        if value == WILDCARD:
            return [Problem(path, '"*" can only be disabled')]
        return [Problem(path, f"invalid plugin name {value!r}: {PLUGIN_NAME_RULE}")]
    return [Problem(path, error.message)]


PLUGIN_NAME = r"^[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?$"
PLUGIN_NAME_OR_WILDCARD = r"^(\*|[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?)$"
"""The CRD's patterns of plugin names (enabled, pluginConfig) and of disabled names."""
PLUGIN_NAME_RULE = "letters, digits and -_./ only, starting and ending with a letter or digit"
WILDCARD = "*"


def _article(expected: Any) -> str:
    names = [expected] if isinstance(expected, str) else list(expected)
    return " or ".join(f"an {name}" if name[0] in "aeiou" else f"a {name}" for name in names)

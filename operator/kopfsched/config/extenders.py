"""Parsing and validating HTTP extenders (kubescheduler.config.k8s.io/v1 `Extender`).

The same list shape is read from a KubeSchedulerConfiguration's `extenders` (shared by all
its profiles, as upstream) and from a SchedulerProfile's `spec.extenders` (that profile
only). Checks follow upstream's validateExtenders — a positive weight for prioritizers,
at most one binder, valid and unique managed extended resource names — plus what a
kopfsched user would otherwise only learn at the first HTTP call: a urlPrefix is needed,
and httpTimeout must be a duration.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlparse

from kopfsched.config.field_checks import (
    check_known_fields,
    expect_list,
    expect_mapping,
    join,
    optional_bool,
    optional_int,
    optional_str,
)
from kopfsched.config.types import (
    DEFAULT_EXTENDER_TIMEOUT_SECONDS,
    ExtenderConfig,
    ExtenderManagedResource,
    ExtenderTLSConfig,
    Problem,
    ProfileConfig,
)
from kopfsched.framework.duration import parse_duration
from kopfsched.plugins.noderesources.args import invalid, qualified_name_errors
from kopfsched.plugins.noderesources.resource_allocation import is_extended_resource_name

EXTENDER_FIELDS = (
    "urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "bindVerb", "weight", "enableHTTPS", "tlsConfig",
    "httpTimeout", "nodeCacheCapable", "managedResources", "ignorable",
)
TLS_FIELDS = ("insecure", "serverName", "certFile", "keyFile", "caFile", "certData", "keyData", "caData")
NODE_RESOURCES_FIT = "NodeResourcesFit"


def parse_extenders(raw: Any, path: str, problems: list[Problem]) -> tuple[ExtenderConfig, ...]:
    """The extenders of `raw` (a list, or None for none), recording every problem."""
    extenders: list[ExtenderConfig] = []
    binders = 0
    managed: set[str] = set()
    for index, item in enumerate(expect_list(raw, path, problems)):
        item_path = f"{path}[{index}]"
        extender = _parse_one(item, item_path, managed, problems)
        if extender is None:
            continue
        binders += bool(extender.bind_verb)
        extenders.append(extender)
    if binders > 1:
        problems.append(Problem(path, f"only one extender can implement bind, found {binders}"))
    return tuple(extenders)


def _parse_one(item: Any, path: str, managed: set[str], problems: list[Problem]) -> ExtenderConfig | None:
    raw = expect_mapping(item, path, problems)
    if raw is None:
        if item is None:
            problems.append(Problem(path, "must be an object, got null"))
        return None
    before = len(problems)
    check_known_fields(raw, EXTENDER_FIELDS, path, problems)
    url = optional_str(raw, "urlPrefix", path, problems)
    if not url:
        problems.append(Problem(join(path, "urlPrefix"), "required"))
    elif urlparse(url).scheme not in ("http", "https") or not urlparse(url).netloc:
        problems.append(Problem(join(path, "urlPrefix"), invalid(url, "must be an http:// or https:// URL")))
    verbs = {key: optional_str(raw, key, path, problems) or ""
             for key in ("filterVerb", "preemptVerb", "prioritizeVerb", "bindVerb")}
    weight = optional_int(raw, "weight", path, problems)
    if verbs["prioritizeVerb"] and (weight is None or weight <= 0):
        problems.append(Problem(join(path, "weight"), "must have a positive weight applied to it"))
    timeout = _timeout(raw.get("httpTimeout"), join(path, "httpTimeout"), problems)
    resources = _managed_resources(raw.get("managedResources"), join(path, "managedResources"), managed, problems)
    tls = _tls_config(raw.get("tlsConfig"), join(path, "tlsConfig"), problems)
    flags = {key: bool(optional_bool(raw, key, path, problems))
             for key in ("enableHTTPS", "nodeCacheCapable", "ignorable")}
    if len(problems) > before:
        return None
    return ExtenderConfig(
        url_prefix=url or "", filter_verb=verbs["filterVerb"], preempt_verb=verbs["preemptVerb"],
        prioritize_verb=verbs["prioritizeVerb"], bind_verb=verbs["bindVerb"], weight=weight or 0,
        enable_https=flags["enableHTTPS"], tls_config=tls, http_timeout_seconds=timeout,
        node_cache_capable=flags["nodeCacheCapable"], managed_resources=resources, ignorable=flags["ignorable"],
    )


def _timeout(value: Any, path: str, problems: list[Problem]) -> float:
    if value is None:
        return DEFAULT_EXTENDER_TIMEOUT_SECONDS
    seconds = parse_duration(value)
    if seconds is None:
        problems.append(Problem(path, f'must be a duration such as "5s", got {value!r}'))
        return DEFAULT_EXTENDER_TIMEOUT_SECONDS
    if seconds < 0:
        problems.append(Problem(path, f"must not be negative, got {value!r}"))
    # Upstream: a zero timeout means the default.
    return seconds if seconds > 0 else DEFAULT_EXTENDER_TIMEOUT_SECONDS


def _managed_resources(raw: Any, path: str, seen: set[str],
                       problems: list[Problem]) -> tuple[ExtenderManagedResource, ...]:
    """Upstream checks names across all extenders: `seen` is shared by the whole list."""
    resources: list[ExtenderManagedResource] = []
    for index, item in enumerate(expect_list(raw, path, problems)):
        item_path = f"{path}[{index}]"
        resource = expect_mapping(item, item_path, problems)
        if resource is None:
            continue
        check_known_fields(resource, ("name", "ignoredByScheduler"), item_path, problems)
        name = optional_str(resource, "name", item_path, problems)
        name_path = join(item_path, "name")
        if not name:
            problems.append(Problem(name_path, "required"))
            continue
        errors = qualified_name_errors(name)
        for message in errors:
            problems.append(Problem(name_path, invalid(name, message)))
        if not errors and not is_extended_resource_name(name):
            problems.append(Problem(name_path, invalid(name, "is an invalid extended resource name")))
        if name in seen:
            problems.append(Problem(name_path, invalid(name, "duplicate extender managed resource name")))
        seen.add(name)
        ignored = bool(optional_bool(resource, "ignoredByScheduler", item_path, problems))
        resources.append(ExtenderManagedResource(name, ignored))
    return tuple(resources)


def _tls_config(raw: Any, path: str, problems: list[Problem]) -> ExtenderTLSConfig | None:
    tls = expect_mapping(raw, path, problems)
    if tls is None:
        return None
    check_known_fields(tls, TLS_FIELDS, path, problems)
    strings = {key: optional_str(tls, key, path, problems) or ""
               for key in ("serverName", "certFile", "keyFile", "caFile")}
    data = {key: _base64(tls.get(key), join(path, key), problems) for key in ("certData", "keyData", "caData")}
    return ExtenderTLSConfig(
        insecure=bool(optional_bool(tls, "insecure", path, problems)), server_name=strings["serverName"],
        cert_file=strings["certFile"], key_file=strings["keyFile"], ca_file=strings["caFile"],
        cert_data=data["certData"], key_data=data["keyData"], ca_data=data["caData"],
    )


def _base64(value: Any, path: str, problems: list[Problem]) -> bytes:
    """[]byte fields travel as base64 strings in YAML and JSON (as in a kubeconfig)."""
    if value is None or value == "":
        return b""
    if not isinstance(value, str):
        problems.append(Problem(path, "must be a base64 string"))
        return b""
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        problems.append(Problem(path, "must be a base64 string"))
        return b""


def ignored_extended_resources(extenders: Sequence[ExtenderConfig]) -> tuple[str, ...]:
    return tuple(r.name for e in extenders for r in e.managed_resources if r.ignored_by_scheduler)


def with_extenders(profile: ProfileConfig, extenders: tuple[ExtenderConfig, ...]) -> ProfileConfig:
    """The profile calling `extenders`; resources they manage with ignoredByScheduler become
    NodeResourcesFit's ignoredResources (replacing the configured ones, as upstream's
    buildExtenders does)."""
    if not extenders:
        return profile
    args = profile.plugin_args
    ignored = ignored_extended_resources(extenders)
    fit_args = args.get(NODE_RESOURCES_FIT)
    if ignored and fit_args is not None and hasattr(fit_args, "ignored_resources"):
        args = {**args, NODE_RESOURCES_FIT: dataclasses.replace(fit_args, ignored_resources=ignored)}
    return dataclasses.replace(profile, extenders=extenders, plugin_args=args)

"""Parsing and validating HTTP extenders (kubescheduler.config.k8s.io/v1 `Extender`).

The same list shape is read from a KubeSchedulerConfiguration's `extenders` (shared by all
its profiles, as upstream) and from a SchedulerProfile's `spec.extenders` (that profile
only). Checks follow upstream's validateExtenders — a positive weight for prioritizers,
at most one binder, valid and unique managed extended resource names — plus what a
kopfsched user would otherwise only learn at the first HTTP call: a urlPrefix must be an
http(s) URL, and httpTimeout must be a duration. The structure (fields, types, a urlPrefix
present) is the SchedulerProfile CRD's schema, checked by config/schema.py.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlparse

from kopfsched.config.field_checks import join
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

NODE_RESOURCES_FIT = "NodeResourcesFit"


def parse_extenders(raw: list[Any] | None, path: str, problems: list[Problem]) -> tuple[ExtenderConfig, ...]:
    """The extenders of `raw` (a list, or None for none), recording every problem.

    `raw` went through the CRD's schema (config/schema.py: fields, types, urlPrefix present,
    base64 data); an item that was wrong there is None and skipped. What is checked here is
    what the schema cannot say."""
    extenders: list[ExtenderConfig] = []
    binders = 0
    managed: set[str] = set()
    for index, item in enumerate(raw or ()):
        if item is None:
            continue
        extender = _parse_one(item, f"{path}[{index}]", managed, problems)
        if extender is None:
            continue
        binders += bool(extender.bind_verb)
        extenders.append(extender)
    if binders > 1:
        problems.append(Problem(path, f"only one extender can implement bind, found {binders}"))
    return tuple(extenders)


def _parse_one(raw: Mapping[str, Any], path: str, managed: set[str], problems: list[Problem]) -> ExtenderConfig | None:
    before = len(problems)
    url: str | None = raw.get("urlPrefix")
    if url is not None and (urlparse(url).scheme not in ("http", "https") or not urlparse(url).netloc):
        problems.append(Problem(join(path, "urlPrefix"), invalid(url, "must be an http:// or https:// URL")))
    verbs: dict[str, str] = {key: raw.get(key) or "" for key in ("filterVerb", "preemptVerb", "prioritizeVerb",
                                                                 "bindVerb")}
    weight: int | None = raw.get("weight")
    if verbs["prioritizeVerb"] and (weight is None or weight <= 0):
        problems.append(Problem(join(path, "weight"), "must have a positive weight applied to it"))
    timeout = _timeout(raw.get("httpTimeout"), join(path, "httpTimeout"), problems)
    resources = _managed_resources(raw.get("managedResources"), join(path, "managedResources"), managed, problems)
    tls = _tls_config(raw.get("tlsConfig"))
    flags = {key: bool(raw.get(key)) for key in ("enableHTTPS", "nodeCacheCapable", "ignorable")}
    if len(problems) > before or url is None:
        return None
    return ExtenderConfig(
        url_prefix=url, filter_verb=verbs["filterVerb"], preempt_verb=verbs["preemptVerb"],
        prioritize_verb=verbs["prioritizeVerb"], bind_verb=verbs["bindVerb"], weight=weight or 0,
        enable_https=flags["enableHTTPS"], tls_config=tls, http_timeout_seconds=timeout,
        node_cache_capable=flags["nodeCacheCapable"], managed_resources=resources, ignorable=flags["ignorable"],
    )


def _timeout(value: str | None, path: str, problems: list[Problem]) -> float:
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


def _managed_resources(raw: list[Any] | None, path: str, seen: set[str],
                       problems: list[Problem]) -> tuple[ExtenderManagedResource, ...]:
    """Upstream checks names across all extenders: `seen` is shared by the whole list."""
    resources: list[ExtenderManagedResource] = []
    for index, resource in enumerate(raw or ()):
        if resource is None:
            continue
        name: str = resource["name"]
        name_path = f"{path}[{index}].name"
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
        resources.append(ExtenderManagedResource(name, bool(resource.get("ignoredByScheduler"))))
    return tuple(resources)


def _tls_config(tls: Mapping[str, Any] | None) -> ExtenderTLSConfig | None:
    """[]byte fields travel as base64 strings in YAML and JSON (as in a kubeconfig); the
    schema's `format: byte` checked them."""
    if tls is None:
        return None
    strings = {key: tls.get(key) or "" for key in ("serverName", "certFile", "keyFile", "caFile")}
    data = {key: base64.b64decode(tls.get(key) or "") for key in ("certData", "keyData", "caData")}
    return ExtenderTLSConfig(
        insecure=bool(tls.get("insecure")), server_name=strings["serverName"],
        cert_file=strings["certFile"], key_file=strings["keyFile"], ca_file=strings["caFile"],
        cert_data=data["certData"], key_data=data["keyData"], ca_data=data["caData"],
    )


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

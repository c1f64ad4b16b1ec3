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
import ssl
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
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
    extender = ExtenderConfig(
        url_prefix=url, filter_verb=verbs["filterVerb"], preempt_verb=verbs["preemptVerb"],
        prioritize_verb=verbs["prioritizeVerb"], bind_verb=verbs["bindVerb"], weight=weight or 0,
        enable_https=flags["enableHTTPS"], tls_config=tls, http_timeout_seconds=timeout,
        node_cache_capable=flags["nodeCacheCapable"], managed_resources=resources, ignorable=flags["ignorable"],
    )
    if tls is not None or extender.enable_https:
        try:
            tls_context(extender)
        except TLSConfigError as error:
            problems.append(Problem(join(path, f"tlsConfig.{error.field}"), error.message))
            return None
    return extender


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


class TLSConfigError(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


def tls_context(config: ExtenderConfig) -> ssl.SSLContext:
    """The client TLS of an extender: the server is verified against the configured CA (caData
    and/or caFile), else the system's roots, unless tlsConfig.insecure. (Upstream's
    makeTransport skips verification when enableHTTPS has no CA; kopfsched verifies.)
    Raises TLSConfigError naming the field of a CA or key pair that cannot be loaded."""
    tls = config.tls_config or ExtenderTLSConfig()
    context = ssl.create_default_context()
    if tls.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if tls.ca_file:
        try:
            context.load_verify_locations(cafile=tls.ca_file)
        except ssl.SSLError as error:  # an OSError too: first
            raise TLSConfigError("caFile", f"{tls.ca_file}: not a PEM certificate bundle ({error.reason})") from None
        except OSError as error:
            raise TLSConfigError("caFile", f"{tls.ca_file}: {error.strerror or error}") from None
    if tls.ca_data:
        try:
            context.load_verify_locations(cadata=tls.ca_data.decode("ascii"))
        except (ssl.SSLError, UnicodeDecodeError, ValueError) as error:
            reason = getattr(error, "reason", None) or "no certificate in it"
            raise TLSConfigError("caData", f"not a PEM certificate bundle ({reason})") from None
    if tls.cert_data or tls.cert_file or tls.key_data or tls.key_file:
        _load_client_cert(context, tls)
    return context


def _load_client_cert(context: ssl.SSLContext, tls: ExtenderTLSConfig) -> None:
    """ssl only loads certificates from files: inline data goes through a private temp dir."""
    field = "certData" if tls.cert_data else "certFile"
    try:
        if not tls.cert_data and not tls.key_data:
            context.load_cert_chain(tls.cert_file, tls.key_file or None)
            return
        cert_pem = tls.cert_data or Path(tls.cert_file).read_bytes()
        key_pem = tls.key_data or (Path(tls.key_file).read_bytes() if tls.key_file else b"")
        with tempfile.TemporaryDirectory() as tmp:
            cert, key = Path(tmp, "cert.pem"), Path(tmp, "key.pem")
            cert.write_bytes(cert_pem)
            key.touch(mode=0o600)
            key.write_bytes(key_pem)
            context.load_cert_chain(cert, key if key_pem else None)
    except ssl.SSLError as error:
        raise TLSConfigError(field, f"not a matching PEM client certificate and key ({error.reason})") from None
    except OSError as error:
        raise TLSConfigError(field, f"{error.filename or tls.cert_file}: {error.strerror or error}") from None


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

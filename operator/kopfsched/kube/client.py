"""KubeClusterClient: the scheduler's ClusterClient on kubernetes-asyncio's configuration.

Requests go straight through the ApiClient's aiohttp session (`DirectApi`): its TLS
settings, token (refreshed as the ApiClient refreshes it) and default headers, without the
generated client's per-call serialisation layers. Every call goes through one request
helper that rate-limits (client-go's QPS/burst),
retries 5xx, 429 and timeouts, and maps 409 and 404 to the framework's ConflictError and
NotFoundError. A 429 or 5xx carrying Retry-After (API Priority and Fairness rejecting a
request, an overloaded server) is retried after the delay the server asks for, as client-go's
rest client does (up to 10 retries), each wait capped at MAX_RETRY_AFTER; other failures
are retried after RETRY_DELAYS. Objects stay plain dicts: responses are
not turned into model classes (the `object` response type passes JSON through), and the
answers nobody reads (a bind's Status, a created Event) are not parsed at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import inspect
import logging
import math
import os
import socket
import ssl
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import aiohttp.helpers
import orjson
import yarl
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.rest import ApiException
from multidict import CIMultiDict

from kopfsched.framework.client import ClusterError, ConflictError, NotFoundError, Obj
from kopfsched.framework.types import pod_key
from kopfsched.kube.http import HttpPool, Response
from kopfsched.kube.ratelimit import TokenBucket, retry_after_seconds
from kopfsched.tls import client_context

logger = logging.getLogger(__name__)

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
RETRY_DELAYS = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6)
"""Backoff between attempts of one call failing without Retry-After; it gives up after the last."""
MAX_RETRIES = 10
"""client-go's rest client: at most 10 retries of a call answered with Retry-After."""
MAX_RETRY_AFTER = 10.0
"""Longest wait for one Retry-After (seconds): a call waits at most 10 x this for the server."""
REQUEST_TIMEOUT = 30.0
AUTH_REFRESH = 1.0
"""Seconds a token read from the configuration (and its refresh hook) is reused."""
EVENT_CACHE_SIZE = 4096
"""Series kept for deduplication (least recently observed are forgotten first)."""
SERIES_FINISH_SECONDS = 6 * 60.0
"""client-go's events broadcaster finishTime: a series not seen again for this long is over
(its last count written), an Event never repeated this long is forgotten."""
SERIES_REFRESH_SECONDS = 30 * 60.0
"""client-go's refreshTime: every series' count is written again this often (the Event's TTL)."""

_HEADERS = {content_type: {"Content-Type": content_type, "Accept": JSON}
            for content_type in (JSON, MERGE_PATCH, STRATEGIC_MERGE_PATCH)}
_PARSED = {200: "object", 201: "object", 202: "object"}
_NOT_PARSED: dict[int, str | None] = {200: None, 201: None, 202: None}
_AUTH = ["BearerToken"]

LEASES = "/apis/coordination.k8s.io/"
UNFENCED = (LEASES, "/apis/authentication.k8s.io/", "/apis/authorization.k8s.io/")
"""Writes a fenced client still sends: the Lease, and the reviews, which change nothing."""
PROFILE_GROUP, PROFILE_VERSION, PROFILE_PLURAL = "kopfsched.dev", "v1alpha1", "schedulerprofiles"
POD_GROUP_GROUP, POD_GROUP_VERSION, POD_GROUP_PLURAL = "scheduling.x-k8s.io", "v1alpha1", "podgroups"


def without_env_lookups(api: k8s.ApiClient) -> None:
    """Resolve the proxy settings of the environment once, for the API server's URL, instead
    of per request.

    kubernetes_asyncio opens its aiohttp session with trust_env=True: every request then
    looks the proxy up in the environment and reads ~/.netrc, each in a thread of the
    default executor whose result hops back into the loop — in the operator's profile, six
    threads busy doing only that. client-go reads the environment's proxy once too."""
    rest = api.rest_client
    if not rest.proxy and api.configuration.host:
        with contextlib.suppress(LookupError, ValueError):
            proxy, proxy_auth = aiohttp.helpers.get_env_proxy_for_url(yarl.URL(api.configuration.host))
            rest.proxy = str(proxy)
            if proxy_auth is not None:
                rest.proxy_headers = {**(rest.proxy_headers or {}), "Proxy-Authorization": proxy_auth.encode()}
    old = rest.pool_manager
    connector = old.connector
    old.detach()  # the new session owns the connector (and its TLS settings) from now on
    # read_bufsize as kubernetes_asyncio's: watch events of large objects exceed aiohttp's default.
    rest.pool_manager = aiohttp.ClientSession(connector=connector, trust_env=False, read_bufsize=2**21)


class DirectApi:
    """The part of ApiClient.call_api this client uses, with the ApiClient's configuration:
    host, TLS settings, token (its refresh hook included) and default headers.

    The generated client spent more per request than the request itself costs the scheduler's
    loop: parameter sanitising, header tuples, a charset regex on every answer, json, decoding
    answers nobody reads; and aiohttp's ClientSession more on top (docs/performance.md). Here a
    body is encoded once with orjson (cheaper than json, and it writes bytes), the
    request goes through kube.http's keep-alive HTTP/1.1 pool, an answer is parsed
    only when the caller wants it (response type "object"), and errors are the same ApiException
    the retry and error mapping read (status, reason, headers with Retry-After, body). With a
    proxy configured, requests go through the ApiClient's aiohttp session instead."""

    def __init__(self, api: k8s.ApiClient, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.api = api
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}
        configuration, rest = api.configuration, api.rest_client
        self.pool: HttpPool | None = None
        if not rest.proxy:
            https = (configuration.host or "").startswith("https:")
            self.pool = HttpPool(configuration.host or "", ssl_context=_ssl_context(configuration) if https else None,
                                 server_hostname=configuration.tls_server_name,
                                 limit=configuration.connection_pool_maxsize or 100)
        self._clock = clock
        self._auth: dict[str, str] = {}
        self._auth_until = -1.0
        self._encoded: dict[tuple[tuple[str, str], ...], bytes] = {}
        """Header lines per caller's header_params (HttpPool.encode_headers), for the current second."""

    async def _headers(self, header_params: Mapping[str, str] | None) -> dict[str, str]:
        """The ApiClient's default headers, its cookie, the caller's and the token. The token is
        asked for (the configuration's refresh hook included) at most once per AUTH_REFRESH
        seconds: client-go's token sources cache longer (a service account token file a minute)."""
        now = self._clock()
        if now >= self._auth_until:
            auth: dict[str, str] = {}
            authorised = self.api.update_params_for_auth(auth, [], ["BearerToken"])
            if inspect.isawaitable(authorised):  # async since kubernetes-asyncio 33 (the token refresh hook)
                await authorised
            self._auth_until = now + AUTH_REFRESH
            self._auth = auth
            self._encoded.clear()  # re-encoded once a second: a changed default header shows too
        headers = {**self.api.default_headers, **(header_params or {})}
        if self.api.cookie:
            headers["Cookie"] = self.api.cookie
        headers.update(self._auth)
        return headers

    async def call_api(self, path: str, method: str, *, query_params: list[tuple[str, str]] | None = None,
                       body: Any = None, header_params: Mapping[str, str] | None = None,
                       response_types_map: Mapping[int, str | None] | None = None,
                       auth_settings: list[str] | None = None, _request_timeout: float | None = None,
                       **_: Any) -> Any:
        """ApiClient.call_api's signature; the answer parsed when `response_types_map` names a type
        for its status."""
        target = path + ("?" + urllib.parse.urlencode(query_params) if query_params else "")
        return await self.fetch(method, target, body, header_params, response_types_map, _request_timeout)

    async def fetch(self, method: str, target: str, body: Any, header_params: Mapping[str, str] | None,
                    parsed: Mapping[int, str | None] | None, timeout: float | None) -> Any:
        """One request (`target`: path and query); the answer's JSON when `parsed` names a type for
        its status, else None; an ApiException for an answer other than 2xx."""
        data = orjson.dumps(body) if body is not None else None
        if self.pool is not None:
            key = tuple(header_params.items()) if header_params else ()
            if self._clock() >= self._auth_until or (lines := self._encoded.get(key)) is None:
                lines = HttpPool.encode_headers(await self._headers(header_params))
                if len(self._encoded) > 64:  # callers' header sets are few; bounded all the same
                    self._encoded.clear()
                self._encoded[key] = lines
            answer = await self.pool.request(method, target, headers=lines, body=data, timeout=timeout)
        else:
            headers = await self._headers(header_params)
            answer = await self._via_session(method, target, headers, data, timeout)
        status, payload = answer.status, answer.body
        if not 200 <= status <= 299:
            error = ApiException(status=status, reason=answer.reason)
            error.headers, error.body = answer.headers, payload  # type: ignore[assignment]  # case-insensitive too
            raise error
        if parsed is None or parsed.get(status) is None or not payload:
            return None
        try:
            return orjson.loads(payload)
        except orjson.JSONDecodeError:  # as the ApiClient's "object": the text when it is not JSON
            return payload.decode("utf-8", "replace")

    async def _via_session(self, method: str, target: str, headers: Mapping[str, str], data: bytes | None,
                           timeout: float | None) -> Response:
        """The request on the ApiClient's aiohttp session (a proxy is configured)."""
        rest = self.api.rest_client
        options: dict[str, Any] = {"proxy": rest.proxy, "proxy_headers": rest.proxy_headers}
        if rest.server_hostname:
            options["server_hostname"] = rest.server_hostname
        if timeout is not None:
            options["timeout"] = self._timeout(timeout)
        url = (self.api.configuration.host or "") + target
        async with rest.pool_manager.request(method, url, data=data, headers=headers, **options) as response:
            return Response(response.status, response.reason or "", CIMultiDict(response.headers),
                            await response.read())

    def _timeout(self, seconds: float) -> aiohttp.ClientTimeout:
        timeout = self._timeouts.get(seconds)
        if timeout is None:
            timeout = self._timeouts[seconds] = aiohttp.ClientTimeout(total=seconds)
        return timeout

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()


def _ssl_context(configuration: k8s.Configuration) -> ssl.SSLContext:
    """The TLS settings kubernetes_asyncio's REST client gives its connector, from the same
    configuration fields: CA, client certificate, verification switches."""
    return client_context(ca_file=configuration.ssl_ca_cert, cert_file=configuration.cert_file,
                          key_file=configuration.key_file, verify=bool(configuration.verify_ssl),
                          strict=not getattr(configuration, "disable_strict_ssl_verification", False))


def reporting_instance() -> str:
    """The replica's identity in Events and the Lease: the pod name, else the hostname."""
    return os.environ.get("POD_NAME") or socket.gethostname()


_second: list[Any] = [None, ""]
"""The whole second micro_time formatted last, and its text (every Event has an eventTime)."""


def micro_time(now: float | None = None) -> str:
    """A metav1.MicroTime, e.g. 2026-01-01T00:00:00.000000Z."""
    fraction, whole = math.modf(time.time() if now is None else now)  # rounded as datetime rounds it
    second, micros = int(whole), round(fraction * 1e6)
    if micros >= 1_000_000:
        second, micros = second + 1, micros - 1_000_000
    elif micros < 0:
        second, micros = second - 1, micros + 1_000_000
    if _second[0] != second:
        moment = datetime.datetime.fromtimestamp(second, datetime.UTC)
        _second[:] = [second, moment.strftime("%Y-%m-%dT%H:%M:%S")]
    return f"{_second[1]}.{micros:06d}Z"


def _what(what: str | Callable[[], str], method: str, path: str) -> str:
    """What a request does, in words (`request`'s `what`: a text, a function giving it, or nothing)."""
    if callable(what):
        what = what()
    return what or f"{method} {path}"


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, ApiException):
        return exc.status is not None and (exc.status >= 500 or exc.status == 429)
    return isinstance(exc, asyncio.TimeoutError | aiohttp.ClientError)


def _retry_after(exc: BaseException) -> float | None:
    """The Retry-After of an API error (`ratelimit.retry_after_seconds`)."""
    if not isinstance(exc, ApiException):
        return None
    return retry_after_seconds(exc.status, exc.headers)


def _translate(exc: BaseException, what: str) -> ClusterError:
    if isinstance(exc, ApiException):
        message = f"{what}: {exc.status} {exc.reason}: {_api_message(exc)}"
        if exc.status == 409:
            return ConflictError(message)
        if exc.status == 404:
            return NotFoundError(message)
        return ClusterError(message)
    return ClusterError(f"{what}: {type(exc).__name__}: {exc}")


def _api_message(exc: ApiException) -> str:
    body = exc.body.decode("utf-8", "replace") if isinstance(exc.body, bytes) else exc.body
    try:
        return orjson.loads(body).get("message", "") if body else ""
    except (ValueError, AttributeError):
        return str(body)[:200]


@dataclass(slots=True)
class _Series:
    name: str
    namespace: str
    count: int
    created: asyncio.Future[bool]
    event_time: float
    """When the Event was created (wall time)."""
    last_observed: float = 0.0
    """When it was last seen again (wall time), once it is a series (count >= 2)."""


class KubeClusterClient:
    """The ClusterClient protocol (framework.client) against a real API server."""

    def __init__(self, api: k8s.ApiClient | DirectApi, *, qps: float = 50.0, burst: int = 100,
                 instance: str | None = None,
                 retry_delays: tuple[float, ...] = RETRY_DELAYS, wall_time: Callable[[], float] = time.time,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.api = DirectApi(api) if isinstance(api, k8s.ApiClient) else api
        self.limiter = TokenBucket(qps=qps, burst=burst, clock=clock, sleep=sleep)
        # Events get a bucket of their own, as kube-scheduler's separate event client: a
        # storm of FailedScheduling Events must not hold binds and status patches back.
        self.event_limiter = TokenBucket(qps=qps, burst=burst, clock=clock, sleep=sleep)
        self.instance = instance or reporting_instance()
        self.retry_delays = retry_delays
        self._sleep = sleep
        self.wall_time = wall_time
        self._series: OrderedDict[tuple[str, ...], _Series] = OrderedDict()
        self.fenced: str | None = None

    async def close(self) -> None:
        """Close the connections of its own (those of the ApiClient are the ApiClient's to close)."""
        if isinstance(self.api, DirectApi):
            self.api.close()

    def fence(self, reason: str) -> None:
        """Refuse every later write but the Lease's (e.g. after losing leader election, a
        binding still in flight must not bind: another replica schedules now)."""
        self.fenced = reason

    # -- the request helper ----------------------------------------------------------------

    async def request(self, method: str, path: str, *, body: Any = None, content_type: str = JSON,
                      query: Mapping[str, str] | None = None, what: str | Callable[[], str] = "",
                      response_type: str | None = "object", rate_limited: bool = True,
                      limiter: TokenBucket | None = None) -> Any:
        """One API call with rate limiting (`limiter`, by default the main bucket) and
        retries; returns the parsed JSON body (None with `response_type=None`: not parsed).
        `what` (for errors and logs) may be a function, called only when one is written."""
        bucket = (limiter or self.limiter) if rate_limited else None
        headers = _HEADERS.get(content_type) or {"Content-Type": content_type, "Accept": JSON}
        parsed = _PARSED if response_type == "object" else _NOT_PARSED if response_type is None \
            else {200: response_type, 201: response_type, 202: response_type}
        api = self.api
        direct = api if type(api) is DirectApi else None
        target = path + ("?" + urllib.parse.urlencode(list(query.items())) if query else "")
        attempt = 0
        while True:
            if self.fenced is not None and method != "GET" and not path.startswith(UNFENCED):
                raise ClusterError(f"{_what(what, method, path)}: not sent: {self.fenced}")
            if bucket is not None and (wait := bucket.reserve()):
                await bucket.wait(wait)
            try:
                if direct is not None:
                    return await direct.fetch(method, target, body, headers, parsed, REQUEST_TIMEOUT)
                return await api.call_api(
                    path, method, query_params=list(query.items()) if query else None, body=body,
                    header_params=headers, response_types_map=parsed, auth_settings=_AUTH,
                    _return_http_data_only=True, _request_timeout=REQUEST_TIMEOUT)
            except Exception as exc:
                delay = self._retry_delay(exc, attempt)
                if delay is None:
                    raise _translate(exc, _what(what, method, path)) from exc
                logger.debug("%s failed (%s); retrying in %.2fs", _what(what, method, path), exc, delay)
                await self._sleep(delay)
                attempt += 1

    def _retry_delay(self, exc: BaseException, attempt: int) -> float | None:
        """Seconds to wait before retrying after the `attempt`-th failure (0-based); None: give up."""
        retry_after = _retry_after(exc)
        if retry_after is not None:
            return min(retry_after, MAX_RETRY_AFTER) if attempt < MAX_RETRIES else None
        if _retryable(exc) and attempt < len(self.retry_delays):
            return self.retry_delays[attempt]
        return None

    # -- ClusterClient ------------------------------------------------------------------------

    async def bind(self, *, pod: Obj, node_name: str) -> None:
        """POST pods/binding. The generated create_namespaced_pod_binding raises after a
        successful bind (it expects a Binding back, the API answers a Status); the answer
        is read as plain JSON (no V1Status model built per bind: nothing reads it)."""
        meta = pod["metadata"]
        body = {"apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": meta["name"], "namespace": meta.get("namespace"), "uid": meta.get("uid")},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}}
        await self.request("POST", f"/api/v1/namespaces/{meta.get('namespace')}/pods/{meta['name']}/binding",
                           body=body, what=lambda: f"binding {pod_key(pod)} to {node_name}", response_type=None)

    async def patch_pod_status(self, *, pod: Obj, condition: Obj | None = None,
                               nominated_node_name: str | None = None,
                               extended_resource_claim_status: Obj | None = None) -> None:
        status: dict[str, Any] = {}
        if condition is not None:
            status["conditions"] = [condition]  # strategic merge: merged by type
        if nominated_node_name is not None:
            status["nominatedNodeName"] = nominated_node_name or None
        if extended_resource_claim_status is not None:
            status["extendedResourceClaimStatus"] = extended_resource_claim_status
        if not status:
            return
        meta = pod["metadata"]
        await self.request("PATCH", f"/api/v1/namespaces/{meta.get('namespace')}/pods/{meta['name']}/status",
                           body={"status": status}, content_type=STRATEGIC_MERGE_PATCH,
                           what=f"status of pod {pod_key(pod)}", response_type=None)

    async def delete_pod(self, *, pod: Obj, condition: Obj | None = None) -> None:
        if condition is not None:
            await self.patch_pod_status(pod=pod, condition=condition)
        meta = pod["metadata"]
        options = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": meta.get("uid")}}
        await self.request("DELETE", f"/api/v1/namespaces/{meta.get('namespace')}/pods/{meta['name']}",
                           body=options, what=f"deleting pod {pod_key(pod)}", response_type=None)

    async def patch_object(self, *, kind: str, obj: Obj, patch: Mapping[str, Any]) -> Obj:
        meta = obj["metadata"]
        if kind == "PersistentVolume":
            path = f"/api/v1/persistentvolumes/{meta['name']}"
        elif kind == "PersistentVolumeClaim":
            path = f"/api/v1/namespaces/{meta.get('namespace')}/persistentvolumeclaims/{meta['name']}"
        elif kind == "ResourceClaim":
            # A patch of the status goes to the status subresource (allocation, reservedFor);
            # anything else (the finalizer) to the claim itself.
            path = f"/apis/resource.k8s.io/v1/namespaces/{meta.get('namespace')}/resourceclaims/{meta['name']}"
            if "status" in patch:
                path += "/status"
        else:
            raise ValueError(f"cannot patch a {kind}")
        return await self.request("PATCH", path, body=dict(patch), content_type=MERGE_PATCH,
                                  what=f"patching {kind} {meta['name']}")

    async def create_object(self, *, kind: str, obj: Obj) -> Obj:
        if kind != "ResourceClaim":
            raise ValueError(f"cannot create a {kind}")
        namespace = (obj.get("metadata") or {}).get("namespace")
        created: Obj = await self.request("POST", f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims",
                                          body=obj, what=f"creating {kind} in {namespace}")
        return created

    async def delete_object(self, *, kind: str, obj: Obj) -> None:
        if kind != "ResourceClaim":
            raise ValueError(f"cannot delete a {kind}")
        meta = obj["metadata"]
        await self.request("DELETE", f"/apis/resource.k8s.io/v1/namespaces/{meta.get('namespace')}/resourceclaims/"
                           f"{meta['name']}", what=f"deleting {kind} {meta['name']}", response_type=None)

    async def record_event(self, *, regarding: Obj, type: str, reason: str, action: str, message: str,
                           reporting_controller: str) -> None:
        """events.k8s.io/v1 as client-go's events broadcaster writes them: the first occurrence
        creates an Event; the first repeat of the same (object, type, reason, action, message,
        controller) patches it into a series of 2; later repeats are only counted, the count
        being written by `run_event_series` (every 30 minutes, and once the series is over)."""
        meta = regarding.get("metadata") or {}
        key = (meta.get("uid") or pod_key(regarding), type, reason, action, message, reporting_controller)
        series = self._series.get(key)
        if series is not None:
            self._series.move_to_end(key)
            if await self._observe_again(series):
                return
        await self._create_event(key, regarding, type=type, reason=reason, action=action, message=message,
                                 reporting_controller=reporting_controller)

    async def _observe_again(self, series: _Series) -> bool:
        """Count one more occurrence in an existing series; False when it must be recreated."""
        if not await series.created:
            return False
        series.count += 1
        series.last_observed = self.wall_time()
        if series.count > 2:
            return True  # counted: written by the refresh, or when the series is over
        return await self._write_series(series)

    async def _write_series(self, series: _Series) -> bool:
        """PATCH the series' count and last observation; False when the Event is gone."""
        patch = {"series": {"count": series.count, "lastObservedTime": micro_time(series.last_observed)}}
        try:
            await self.request("PATCH", f"/apis/events.k8s.io/v1/namespaces/{series.namespace}/events/{series.name}",
                               body=patch, content_type=MERGE_PATCH, what=f"event {series.name}",
                               limiter=self.event_limiter, response_type=None)
        except NotFoundError:  # expired or deleted: start over
            return False
        return True

    async def _create_event(self, key: tuple[str, ...], regarding: Obj, *, type: str, reason: str, action: str,
                            message: str, reporting_controller: str) -> None:
        meta = regarding.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        now = self.wall_time()
        name = f"{meta.get('name')}.{time.time_ns():x}"
        created: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._series[key] = _Series(name=name, namespace=namespace, count=1, created=created, event_time=now)
        while len(self._series) > EVENT_CACHE_SIZE:
            self._series.popitem(last=False)
        body = {
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "eventTime": micro_time(now), "reportingController": reporting_controller,
            "reportingInstance": self.instance, "action": action, "reason": reason, "type": type, "note": message,
            "regarding": {"apiVersion": regarding.get("apiVersion", "v1"), "kind": regarding.get("kind", "Pod"),
                          "namespace": meta.get("namespace"), "name": meta.get("name"), "uid": meta.get("uid"),
                          "resourceVersion": meta.get("resourceVersion")},
        }
        try:
            await self.request("POST", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", body=body,
                               what=lambda: f"{reason} event for {pod_key(regarding)}", limiter=self.event_limiter,
                               response_type=None)
        except BaseException:
            created.set_result(False)
            if self._series.get(key) is not None and self._series[key].created is created:
                del self._series[key]
            raise
        created.set_result(True)

    async def finish_series(self) -> None:
        """client-go's finishSeries: a series not observed for SERIES_FINISH_SECONDS gets its
        last count written and is forgotten; so is an Event that never repeated in that time."""
        horizon = self.wall_time() - SERIES_FINISH_SECONDS
        for key, series in list(self._series.items()):
            if not series.created.done() or not series.created.result():
                continue
            if series.count >= 2:
                if series.last_observed < horizon:
                    await self._write_series_quietly(series)
                    self._forget_series(key, series)
            elif series.event_time < horizon:
                self._forget_series(key, series)

    async def refresh_series(self) -> None:
        """client-go's refreshExistingEventSeries: every series' count written again."""
        for series in list(self._series.values()):
            if series.count >= 2 and series.created.done() and series.created.result():
                await self._write_series_quietly(series)

    async def run_event_series(self, stop: asyncio.Event) -> None:
        """finish_series every SERIES_FINISH_SECONDS and refresh_series every
        SERIES_REFRESH_SECONDS, until `stop` is set (the broadcaster's two loops)."""
        next_refresh = self.wall_time() + SERIES_REFRESH_SECONDS
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), SERIES_FINISH_SECONDS)
            if stop.is_set():
                return
            await self.finish_series()
            if self.wall_time() >= next_refresh:
                await self.refresh_series()
                next_refresh = self.wall_time() + SERIES_REFRESH_SECONDS

    async def _write_series_quietly(self, series: _Series) -> None:
        try:
            await self._write_series(series)
        except Exception as exc:  # an Event is informational only
            logger.warning("failed to write the series of event %s: %s", series.name, exc)

    def _forget_series(self, key: tuple[str, ...], series: _Series) -> None:
        if self._series.get(key) is series:
            del self._series[key]

    # -- beyond the protocol: the kube layer's own writes ------------------------------------

    async def patch_profile_status(self, *, name: str, status: Mapping[str, Any]) -> None:
        """Merge-patch a SchedulerProfile's status subresource."""
        path = f"/apis/{PROFILE_GROUP}/{PROFILE_VERSION}/{PROFILE_PLURAL}/{name}/status"
        await self.request("PATCH", path, body={"status": dict(status)}, content_type=MERGE_PATCH,
                           what=f"status of SchedulerProfile {name}", response_type=None)

    async def patch_pod_group_status(self, *, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        """Merge-patch a PodGroup's status subresource (scheduler-plugins' v1alpha1)."""
        path = f"/apis/{POD_GROUP_GROUP}/{POD_GROUP_VERSION}/namespaces/{namespace}/{POD_GROUP_PLURAL}/{name}/status"
        await self.request("PATCH", path, body={"status": dict(status)}, content_type=MERGE_PATCH,
                           what=f"status of PodGroup {namespace}/{name}", response_type=None)

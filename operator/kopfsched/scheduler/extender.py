"""HTTPExtender: kube-scheduler's HTTP extender protocol, spoken with aiohttp.

As upstream's pkg/scheduler/extender.go: each verb is a JSON POST to
`<urlPrefix>/<verb>`; the bodies are k8s.io/kube-scheduler/extender/v1 types, whose Go
structs have no json tags, so the keys are the capitalized Go field names (`Pod`,
`Nodes`, `NodeNames`, `FailedNodes`, ...) while the embedded Kubernetes objects keep
their usual camelCase. Go decodes case-insensitively, so answers are read the same way.
Any non-200 answer is an error; every call is bounded by httpTimeout and its answer by
MAX_ANSWER_BYTES, and an answer of the wrong shape is an ExtenderError like any other failure
(an ignorable extender is then skipped, another fails the pod's attempt; never the loop).
TLS verifies the server (the system's roots, or the configured CA) unless tlsConfig.insecure.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

from kopfsched.config.extenders import tls_context
from kopfsched.config.types import ExtenderConfig
from kopfsched.framework.types import NodeInfo, PodInfo

if TYPE_CHECKING:
    import aiohttp

MAX_EXTENDER_PRIORITY = 10
"""extenderv1.MaxExtenderPriority: extenders score nodes 0..10."""
MAX_NODE_SCORE = 100
"""framework.MaxNodeScore: extender scores are scaled up to the plugins' 0..100 range."""
MAX_ANSWER_BYTES = 64 * 2**20
"""The largest answer read: a filter answer of whole Node objects for thousands of nodes
fits; an extender streaming without end is cut off there."""
EXTENDER_NAME = "Extender"
"""The pseudo plugin recorded as a pod's rejector when extenders filtered nodes out
(upstream's framework.ExtenderName); any cluster event requeues such a pod."""


class ExtenderError(Exception):
    """A call failed: unreachable, timed out, non-200, undecodable, or an `Error` answer."""


@dataclass(slots=True)
class FilterResult:
    """An extender's filter answer, with node names in place of Node objects."""

    node_names: list[str]
    failed: dict[str, str] = field(default_factory=dict)
    failed_and_unresolvable: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Victims:
    """extenderv1.Victims: the pods preemption would evict on one node."""

    pods: list[PodInfo]
    num_pdb_violations: int = 0


F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def _decoded(verb: str) -> Callable[[F], F]:
    """A verb whose answer of the wrong shape (a string where a list belongs, a list where an
    object does...) fails as the extender's ExtenderError, not as a bug of the scheduler's."""
    def wrap(method: F) -> F:
        @functools.wraps(method)
        async def call(self: HTTPExtender, *args: Any, **kwargs: Any) -> Any:
            try:
                return await method(self, *args, **kwargs)
            except ExtenderError:
                raise
            except (TypeError, AttributeError, ValueError, KeyError, RecursionError) as error:
                raise ExtenderError(f"extender {self.name!r} returned a malformed {verb} answer: "
                                    f"{type(error).__name__}: {error}") from error
        return cast(F, call)
    return wrap


class HTTPExtender:
    """One configured extender; the aiohttp session is opened on first use and closed by `close()`."""

    def __init__(self, config: ExtenderConfig) -> None:
        self.config = config
        self.managed_resources = frozenset(r.name for r in config.managed_resources)
        self._session: aiohttp.ClientSession | None = None

    def __repr__(self) -> str:
        return f"HTTPExtender({self.name})"

    @property
    def name(self) -> str:
        return self.config.url_prefix

    @property
    def weight(self) -> int:
        return self.config.weight

    def is_ignorable(self) -> bool:
        return self.config.ignorable

    def is_filter(self) -> bool:
        return bool(self.config.filter_verb)

    def is_prioritizer(self) -> bool:
        return bool(self.config.prioritize_verb)

    def is_binder(self) -> bool:
        return bool(self.config.bind_verb)

    def supports_preemption(self) -> bool:
        return bool(self.config.preempt_verb)

    def is_interested(self, pod: PodInfo) -> bool:
        """True when the pod requests or limits a managed resource, or none are configured."""
        if not self.managed_resources:
            return True
        spec = pod.spec
        for key in ("containers", "initContainers"):
            for container in spec.get(key) or ():
                resources = container.get("resources") or {}
                for kind in ("requests", "limits"):
                    if not self.managed_resources.isdisjoint(resources.get(kind) or ()):
                        return True
        return False

    # -- verbs -------------------------------------------------------------------------------

    @_decoded("filter")
    async def filter(self, pod: PodInfo, nodes: Sequence[NodeInfo]) -> FilterResult:
        """The nodes the extender keeps (a subset of `nodes`) and why it refused the others."""
        if not self.is_filter():
            return FilterResult([node.name for node in nodes])
        result = await self._send(self.config.filter_verb, self._args(pod, nodes))
        if not isinstance(result, Mapping):
            raise ExtenderError(f"extender {self.name!r} returned a filter result that is not an object")
        error = _get(result, "Error")
        if error:
            raise ExtenderError(str(error))
        known = {node.name for node in nodes}
        names = _get(result, "NodeNames")
        node_list = _get(result, "Nodes")
        if self.config.node_cache_capable and names is not None:
            kept = [str(name) for name in names]
        elif node_list is not None:
            items = _get(node_list, "Items") or []
            kept = [str(((item or {}).get("metadata") or {}).get("name", "")) for item in items]
        else:
            kept = []
        for name in kept:
            if name not in known:
                raise ExtenderError(
                    f"extender {self.name!r} claims a filtered node {name!r} which is not found in the input node list")
        return FilterResult(kept, _failed_map(_get(result, "FailedNodes")),
                            _failed_map(_get(result, "FailedAndUnresolvableNodes")))

    @_decoded("prioritize")
    async def prioritize(self, pod: PodInfo, nodes: Sequence[NodeInfo]) -> list[tuple[str, int]]:
        """[(host, score 0..10)] as the extender answered; multiply by weight to use."""
        if not self.is_prioritizer():
            return [(node.name, 0) for node in nodes]
        result = await self._send(self.config.prioritize_verb, self._args(pod, nodes))
        if not isinstance(result, list):
            raise ExtenderError(f"extender {self.name!r} returned a priority list that is not an array")
        scores: list[tuple[str, int]] = []
        for entry in result:
            host, score = _get(entry, "Host"), _get(entry, "Score")
            if not isinstance(host, str) or isinstance(score, bool) or not isinstance(score, int):
                raise ExtenderError(f"extender {self.name!r} returned a malformed host priority {entry!r}")
            scores.append((host, score))
        return scores

    @_decoded("bind")
    async def bind(self, pod: PodInfo, node: str) -> None:
        """Delegate binding the pod to `node` (ExtenderBindingArgs → ExtenderBindingResult)."""
        meta = pod.pod.get("metadata") or {}
        args = {"PodName": meta.get("name", ""), "PodNamespace": meta.get("namespace", "default"),
                "PodUID": meta.get("uid", ""), "Node": node}
        result = await self._send(self.config.bind_verb, args)
        error = _get(result, "Error") if isinstance(result, Mapping) else None
        if error:
            raise ExtenderError(str(error))

    @_decoded("preempt")
    async def process_preemption(self, pod: PodInfo, node_to_victims: Mapping[str, Victims],
                                 nodes: Mapping[str, NodeInfo]) -> dict[str, Victims]:
        """The candidates the extender accepts, with the victims it chose (by UID, on `nodes`)."""
        if not self.supports_preemption():
            raise ExtenderError(f"preempt verb is not defined for extender {self.name} but run into ProcessPreemption")
        args: dict[str, Any] = {"Pod": pod.pod, "NodeNameToVictims": None, "NodeNameToMetaVictims": None}
        if self.config.node_cache_capable:
            args["NodeNameToMetaVictims"] = {
                node: {"Pods": [{"UID": v.uid} for v in victims.pods], "NumPDBViolations": victims.num_pdb_violations}
                for node, victims in node_to_victims.items()}
        else:
            args["NodeNameToVictims"] = {
                node: {"Pods": [v.pod for v in victims.pods], "NumPDBViolations": victims.num_pdb_violations}
                for node, victims in node_to_victims.items()}
        result = await self._send(self.config.preempt_verb, args)
        meta_victims = _get(result, "NodeNameToMetaVictims") if isinstance(result, Mapping) else None
        return self._convert_to_victims(meta_victims or {}, nodes)

    def _convert_to_victims(self, meta: Mapping[str, Any], nodes: Mapping[str, NodeInfo]) -> dict[str, Victims]:
        out: dict[str, Victims] = {}
        for node_name, victims in meta.items():
            node = nodes.get(node_name)
            if node is None:
                raise ExtenderError(f'nodeinfo not found for node name "{node_name}"')
            by_uid = {p.uid: p for p in node.iter_pods()}
            pods = []
            for meta_pod in _get(victims, "Pods") or ():
                uid = str(_get(meta_pod, "UID") or "")
                if uid not in by_uid:
                    raise ExtenderError(f"extender: {self.name} claims to preempt pod (UID: {uid}) on node: "
                                        f"{node_name}, but the pod is not found on that node")
                pods.append(by_uid[uid])
            out[node_name] = Victims(pods, int(_get(victims, "NumPDBViolations") or 0))
        return out

    # -- transport ---------------------------------------------------------------------------

    def _args(self, pod: PodInfo, nodes: Sequence[NodeInfo]) -> dict[str, Any]:
        """ExtenderArgs: names for a node-cache-capable extender, whole Nodes otherwise."""
        if self.config.node_cache_capable:
            return {"Pod": pod.pod, "Nodes": None, "NodeNames": [node.name for node in nodes]}
        return {"Pod": pod.pod, "Nodes": {"metadata": {}, "items": [node.node for node in nodes]}, "NodeNames": None}

    async def _send(self, verb: str, args: Any) -> Any:
        import aiohttp  # late: profiles without extenders (and bench) never load it
        url = self.config.url_prefix.rstrip("/") + "/" + verb
        session = self._get_session()
        tls = self.config.tls_config
        extra: dict[str, Any] = {"server_hostname": tls.server_name} if tls is not None and tls.server_name else {}
        try:
            async with session.post(url, json=args, **extra) as response:
                if response.status != 200:
                    raise ExtenderError(f"failed {verb} with extender at URL {url}, code {response.status}")
                if (response.content_length or 0) > MAX_ANSWER_BYTES:
                    raise ExtenderError(f"{verb} answer of extender at URL {url} is {response.content_length} bytes, "
                                        f"more than {MAX_ANSWER_BYTES}")
                body = bytearray()
                async for chunk in response.content.iter_chunked(2**16):
                    body += chunk
                    if len(body) > MAX_ANSWER_BYTES:
                        raise ExtenderError(f"{verb} answer of extender at URL {url} is more than "
                                            f"{MAX_ANSWER_BYTES} bytes")
            try:
                return json.loads(body)
            except (ValueError, RecursionError) as error:
                raise ExtenderError(f"{verb} answer of extender at URL {url} is not JSON: {error}") from None
        except ExtenderError:
            raise
        except TimeoutError:
            raise ExtenderError(f'Post "{url}": timed out after {self.config.http_timeout_seconds:g}s') from None
        except (aiohttp.ClientError, ValueError) as error:
            raise ExtenderError(f'Post "{url}": {error}') from error

    def _get_session(self) -> aiohttp.ClientSession:
        import aiohttp
        if self._session is None or self._session.closed:
            ssl_context = tls_context(self.config) if self.config.enable_https or self.config.tls_config else None
            connector = aiohttp.TCPConnector(ssl=ssl_context if ssl_context is not None else False)
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=aiohttp.ClientTimeout(total=self.config.http_timeout_seconds),
                headers={"Content-Type": "application/json"})
        return self._session

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None


async def close_all(extenders: Iterable[HTTPExtender]) -> None:
    await asyncio.gather(*(e.close() for e in extenders), return_exceptions=True)


class ExtenderPool:
    """One HTTPExtender (so one connection pool) per distinct extender configuration, shared
    by the profiles that call it and kept across profile reloads."""

    def __init__(self) -> None:
        self._clients: dict[ExtenderConfig, HTTPExtender] = {}

    def for_extenders(self, configs: Iterable[ExtenderConfig]) -> tuple[HTTPExtender, ...]:
        """The clients of a profile's extenders, ignorable ones last (as upstream)."""
        ordered = sorted(configs, key=lambda e: e.ignorable)
        return tuple(self._clients.setdefault(e, HTTPExtender(e)) for e in ordered)

    def release_unused(self, used: Iterable[HTTPExtender]) -> list[HTTPExtender]:
        """Forget the clients no profile uses any more; returns them, for closing."""
        keep = {id(e) for e in used}
        unused = [e for e in self._clients.values() if id(e) not in keep]
        self._clients = {k: e for k, e in self._clients.items() if id(e) in keep}
        return unused

    async def close(self) -> None:
        await close_all(self._clients.values())


def _get(obj: Any, key: str) -> Any:
    """A field of a decoded Go struct: exact key first, then any casing (as encoding/json)."""
    if not isinstance(obj, Mapping):
        return None
    if key in obj:
        return obj[key]
    lower = key.lower()
    for name, value in obj.items():
        if isinstance(name, str) and name.lower() == lower:
            return value
    return None


def _failed_map(raw: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in raw.items()} if isinstance(raw, Mapping) else {}

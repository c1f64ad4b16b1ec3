"""The secure port: HTTPS with delegated authentication and authorization, as kube-scheduler
serves its /metrics and /debug (k8s.io/apiserver's DelegatingAuthenticationOptions and
DelegatingAuthorizationOptions, server/options/authentication.go and authorization.go).

Each request but those to an always-allowed path (`--authorization-always-allow-paths`,
upstream's default /healthz, /readyz, /livez) must carry `Authorization: Bearer <token>`:
- the token is authenticated by the API server (a TokenReview); no token or one the
  server does not recognise answers 401;
- the user it names is authorized for the request's verb (the lowercased method, `get`
  for GET) on the request's path (a non-resource SubjectAccessReview); a denial answers 403
  with upstream's message, an unanswered review 500.

This module knows HTTP only: the two reviews are callables the kube layer hands in (it owns
the API client). Both answers are cached as upstream caches them — tokens 10 s whether
authenticated or not (`cache.New(tokenAuth, false, CacheTTL, CacheTTL)`), authorizations
10 s allowed and 10 s denied (AllowCacheTTL / DenyCacheTTL) — so a scrape every few seconds
costs the API server one review of each kind per 10 s; errors are never cached, and
concurrent requests that need the same answer share one review.

Differences from upstream, on purpose: a request without a token is refused with 401 instead
of being authorized as `system:anonymous`, so no RBAC binding of the anonymous user can open
the port; the serving certificate is read once at start (no reload on change).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import socket
import ssl
import tempfile
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from aiohttp import web

logger = logging.getLogger(__name__)

DEFAULT_ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")
TOKEN_TTL = 10.0
"""DelegatingAuthenticationOptions.CacheTTL, for authenticated and unauthenticated answers."""
ALLOW_TTL = 10.0
DENY_TTL = 10.0
"""DelegatingAuthorizationOptions.AllowCacheTTL and DenyCacheTTL."""
CACHE_SIZE = 4096
"""Answers kept per cache (least recently used forgotten first): a flood of made-up tokens
costs a review each but cannot grow memory."""
PAIR_NAME = "kopfsched"
"""--cert-dir holds <PAIR_NAME>.crt and <PAIR_NAME>.key (upstream's SecureServingOptions.PairName)."""


@dataclass(frozen=True, slots=True)
class UserInfo:
    """Who a token belongs to, as the TokenReview's status.user says."""

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str = ""
    """The authorizer's reason, appended to the 403's message."""


Authenticate = Callable[[str], Awaitable[UserInfo | None]]
"""A bearer token → its user, None when the API server does not authenticate it; raises
when it could not ask."""
Authorize = Callable[[UserInfo, str, str], Awaitable[Decision]]
"""(user, verb, path) → the decision; raises when it could not ask."""


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class AnswerCache(Generic[K, V]):
    """Answers for `ttl(answer)` seconds, LRU-bounded, one computation per key at a time."""

    def __init__(self, *, ttl: Callable[[V], float], size: int = CACHE_SIZE,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl
        self._size = size
        self._clock = clock
        self._answers: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._asking: dict[K, asyncio.Future[V]] = {}

    def __len__(self) -> int:
        return len(self._answers)

    async def get(self, key: K, ask: Callable[[], Awaitable[V]]) -> V:
        cached = self._answers.get(key)
        if cached is not None:
            if cached[0] > self._clock():
                self._answers.move_to_end(key)
                return cached[1]
            del self._answers[key]
        if (pending := self._asking.get(key)) is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[V] = asyncio.get_running_loop().create_future()
        self._asking[key] = future
        try:
            answer = await ask()
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no warning when nobody else waited
            raise
        finally:
            del self._asking[key]
        future.set_result(answer)
        self._answers[key] = (self._clock() + self._ttl(answer), answer)
        while len(self._answers) > self._size:
            self._answers.popitem(last=False)
        return answer


class CachingAuthenticator:
    """`authenticate` behind a cache keyed by the token's SHA-256 (the token is not kept)."""

    def __init__(self, authenticate: Authenticate, *, ttl: float = TOKEN_TTL, failure_ttl: float = TOKEN_TTL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._authenticate = authenticate
        self._cache: AnswerCache[bytes, UserInfo | None] = AnswerCache(
            ttl=lambda user: ttl if user is not None else failure_ttl, clock=clock)

    async def __call__(self, token: str) -> UserInfo | None:
        key = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
        return await self._cache.get(key, lambda: self._authenticate(token))


class CachingAuthorizer:
    def __init__(self, authorize: Authorize, *, allow_ttl: float = ALLOW_TTL, deny_ttl: float = DENY_TTL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._authorize = authorize
        self._cache: AnswerCache[tuple[UserInfo, str, str], Decision] = AnswerCache(
            ttl=lambda decision: allow_ttl if decision.allowed else deny_ttl, clock=clock)

    async def __call__(self, user: UserInfo, verb: str, path: str) -> Decision:
        return await self._cache.get((user, verb, path), lambda: self._authorize(user, verb, path))


class PathMatcher:
    """upstream's authorization/path authorizer: each entry matches a path exactly, or, ending
    in `*`, as a prefix; a leading `/` is optional. A `*` anywhere else is refused."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.exact: set[str] = set()
        self.prefixes: list[str] = []
        for raw in paths:
            entry = raw.removeprefix("/")
            if "*" in entry[:-1]:
                raise ValueError(f"only trailing * allowed in {raw!r}")
            if entry.endswith("*"):
                self.prefixes.append(entry[:-1])
            else:
                self.exact.add(entry)

    def __call__(self, path: str) -> bool:
        path = path.removeprefix("/")
        return path in self.exact or any(path.startswith(prefix) for prefix in self.prefixes)


class DelegatedAuth:
    """What the secure port checks; `authenticate` and `authorize` come from the kube layer
    (kube/delegation.py) and are asked through the caches above."""

    def __init__(self, *, authenticate: Authenticate, authorize: Authorize,
                 always_allow_paths: Iterable[str] = DEFAULT_ALWAYS_ALLOW_PATHS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.always_allow_paths = tuple(always_allow_paths)
        self._allowed = PathMatcher(self.always_allow_paths)
        self.authenticate = CachingAuthenticator(authenticate, clock=clock)
        self.authorize = CachingAuthorizer(authorize, clock=clock)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                         ) -> web.StreamResponse:
        path = request.path
        if self._allowed(path):
            return await handler(request)
        token = bearer_token(request.headers)
        if not token:
            return unauthorized()
        try:
            user = await self.authenticate(token)
        except Exception as exc:  # upstream: an authentication error is a 401, logged
            logger.warning("unable to authenticate the request to %s: %s", path, exc)
            return unauthorized()
        if user is None:
            return unauthorized()
        verb = request.method.lower()
        try:
            decision = await self.authorize(user, verb, path)
        except Exception as exc:
            logger.warning("unable to authorize %s %s for %s: %s", verb, path, user.username, exc)
            return status_response(500, "InternalError", f"Internal error occurred: {exc}")
        if not decision.allowed:
            message = f"forbidden: User {json.dumps(user.username)} cannot {verb} path {json.dumps(path)}"
            if decision.reason:
                message += f": {decision.reason}"
            return status_response(403, "Forbidden", _sanitized(message), details={})
        return await handler(request)


def bearer_token(headers: Mapping[str, str]) -> str:
    """The token of `Authorization: Bearer <token>` (scheme case-insensitive, as upstream's
    bearertoken authenticator), else ""."""
    scheme, _, token = headers.get("Authorization", "").strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def unauthorized() -> web.Response:
    return status_response(401, "Unauthorized", "Unauthorized")


def status_response(code: int, reason: str, message: str, *, details: dict[str, Any] | None = None) -> web.Response:
    """A metav1.Status, as the API server's filters answer."""
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": message, "reason": reason}
    if details is not None:
        body["details"] = details
    body["code"] = code
    return web.Response(status=code, body=json.dumps(body).encode(), content_type="application/json",
                        headers={"X-Content-Type-Options": "nosniff"})


def _sanitized(message: str) -> str:
    """Upstream's sanitizer: no error message looks like HTML."""
    return message.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# -- the serving certificate ---------------------------------------------------------------


class ServingCertError(Exception):
    """An unusable --tls-cert-file / --tls-private-key-file / --cert-dir: one line."""


def serving_context(*, cert_file: str | None = None, key_file: str | None = None, cert_dir: str | None = None,
                    hosts: Iterable[str] = ()) -> ssl.SSLContext:
    """The secure port's TLS: the given pair, else <cert-dir>/kopfsched.{crt,key} (made
    self-signed when missing), else a self-signed pair made in memory — as upstream's
    SecureServingOptions.MaybeDefaultWithSelfSignedCerts. TLS 1.2 at least, as upstream."""
    if bool(cert_file) != bool(key_file):
        raise ServingCertError("--tls-cert-file and --tls-private-key-file must be given together")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert_file and key_file:
        _load(context, cert_file, key_file)
        return context
    names = list(dict.fromkeys([*hosts, "localhost", "127.0.0.1", socket.gethostname()]))
    if cert_dir:
        cert, key = Path(cert_dir, f"{PAIR_NAME}.crt"), Path(cert_dir, f"{PAIR_NAME}.key")
        if not (cert.exists() and key.exists()):
            cert_pem, key_pem = self_signed(names)
            try:
                Path(cert_dir).mkdir(parents=True, exist_ok=True)
                key.touch(mode=0o600)
                key.write_bytes(key_pem)
                cert.write_bytes(cert_pem)
            except OSError as exc:
                raise ServingCertError(f"--cert-dir {cert_dir}: {exc.strerror or exc}") from exc
            logger.info("generated a self-signed serving certificate in %s for %s", cert_dir, ", ".join(names))
        _load(context, str(cert), str(key))
        return context
    cert_pem, key_pem = self_signed(names)
    # ssl loads certificates from files only: a private directory, removed at once.
    with tempfile.TemporaryDirectory(prefix="kopfsched-serving-") as tmp:
        cert, key = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
        cert.write_bytes(cert_pem)
        key.touch(mode=0o600)
        key.write_bytes(key_pem)
        _load(context, str(cert), str(key))
    logger.info("serving with a self-signed certificate made in memory for %s", ", ".join(names))
    return context


def _load(context: ssl.SSLContext, cert_file: str, key_file: str) -> None:
    try:
        context.load_cert_chain(cert_file, key_file)
    except ssl.SSLError as exc:  # an OSError too: first
        raise ServingCertError(f"{cert_file} and {key_file}: not a matching PEM certificate and key "
                               f"({exc.reason or exc})") from exc
    except OSError as exc:
        raise ServingCertError(f"{exc.filename or cert_file}: {exc.strerror or exc}") from exc


def self_signed(hosts: Iterable[str], *, days: int = 365) -> tuple[bytes, bytes]:
    """A PEM certificate and key for `hosts` (DNS names and IP addresses), self-signed."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"kopfsched@{int(now.timestamp())}")])
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


__all__ = [
    "DEFAULT_ALWAYS_ALLOW_PATHS", "AnswerCache", "Authenticate", "Authorize", "CachingAuthenticator",
    "CachingAuthorizer", "Decision", "DelegatedAuth", "PathMatcher", "ServingCertError", "UserInfo",
    "bearer_token", "self_signed", "serving_context",
]

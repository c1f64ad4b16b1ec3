"""The secure port on 127.0.0.1 over real TLS: a real aiohttp server and client, the kube layer's
reviews (kube/delegation.py through KubeClusterClient) answered by a small aiohttp app standing
in for the API server's two review endpoints. The caches run on a fake clock."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from kubernetes_asyncio import client as k8s

from kopfsched.kube.client import KubeClusterClient
from kopfsched.kube.delegation import SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS, ApiServerReviews
from kopfsched.observability.health import HealthServer
from kopfsched.observability.metrics import SchedulerMetrics
from kopfsched.observability.secure import (
    DelegatedAuth,
    PathMatcher,
    ServingCertError,
    UserInfo,
    bearer_token,
    self_signed,
    serving_context,
)

PROMETHEUS = "system:serviceaccount:monitoring:prometheus"
NOBODY = "system:serviceaccount:default:nobody"


@dataclass
class ReviewServer:
    """The API server's TokenReview and SubjectAccessReview, from two tables."""

    tokens: dict[str, dict[str, Any]] = field(default_factory=lambda: {
        "good": {"username": PROMETHEUS, "uid": "u-1", "groups": ["system:serviceaccounts", "system:authenticated"]},
        "norbac": {"username": NOBODY, "groups": ["system:authenticated"]},
    })
    grants: set[tuple[str, str, str]] = field(default_factory=lambda: {
        (PROMETHEUS, "get", "/metrics"), (PROMETHEUS, "get", "/debug/pending")})
    token_reviews: list[dict[str, Any]] = field(default_factory=list)
    access_reviews: list[dict[str, Any]] = field(default_factory=list)
    failing: bool = False
    auth_header: list[str] = field(default_factory=list)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post(TOKEN_REVIEWS, self._token_review)
        app.router.add_post(SUBJECT_ACCESS_REVIEWS, self._access_review)
        return app

    async def _token_review(self, request: web.Request) -> web.Response:
        self.auth_header.append(request.headers.get("Authorization", ""))
        if self.failing:
            return web.Response(status=400, text="no")
        review = await request.json()
        self.token_reviews.append(review)
        user = self.tokens.get(review["spec"]["token"])
        status = {"authenticated": True, "user": user} if user else {"authenticated": False, "error": "invalid"}
        return web.json_response({**review, "status": status})

    async def _access_review(self, request: web.Request) -> web.Response:
        review = await request.json()
        self.access_reviews.append(review)
        spec = review["spec"]
        attrs = spec["nonResourceAttributes"]
        allowed = (spec["user"], attrs["verb"], attrs["path"]) in self.grants
        status = {"allowed": True, "reason": 'RBAC: allowed by ClusterRoleBinding "prometheus"'} if allowed \
            else {"allowed": False}
        return web.json_response({**review, "status": status})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Served:
    reviews: ReviewServer
    clock: Clock
    session: aiohttp.ClientSession
    url: str

    async def get(self, path: str, token: str | None = None, **headers: str) -> tuple[int, Any]:
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        async with self.session.get(self.url + path, headers=headers) as response:
            text = await response.text()
            is_json = response.content_type == "application/json"
            return response.status, json.loads(text) if is_json else text


class Pending:
    async def overview(self) -> dict[str, Any]:
        return {"profiles": []}

    async def pending(self) -> bytes:
        return b'{"pods":[{"namespace":"default","name":"web-1"}]}'

    def pending_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return None


@pytest.fixture
async def served(tmp_path) -> AsyncIterator[Served]:
    reviews, clock = ReviewServer(), Clock()
    runner = web.AppRunner(reviews.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    configuration = k8s.Configuration(host=f"http://127.0.0.1:{runner.addresses[0][1]}")
    configuration.api_key = {"BearerToken": "operator-token"}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    api = k8s.ApiClient(configuration)
    client = KubeClusterClient(api, instance="test", retry_delays=())
    delegated = ApiServerReviews(client)
    server = HealthServer(port=0, host="127.0.0.1", healthy=lambda: True, ready=lambda: True,
                          registry=SchedulerMetrics().registry, dashboard=Pending(),
                          ssl_context=serving_context(), auth=DelegatedAuth(
                              authenticate=delegated.authenticate, authorize=delegated.authorize, clock=clock))
    await server.start()
    insecure = ssl.create_default_context()
    insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=insecure)) as session:
            yield Served(reviews, clock, session, f"https://127.0.0.1:{server.port}")
    finally:
        await server.stop()
        await client.close()
        await api.close()
        await runner.cleanup()


UNAUTHORIZED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "Unauthorized", "reason": "Unauthorized", "code": 401}


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/livez"])
async def test_the_health_paths_are_open_without_a_token(served, path):
    assert await served.get(path) == (200, "ok")
    assert served.reviews.token_reviews == []


@pytest.mark.parametrize("path", ["/metrics", "/debug/pending", "/debug/overview", "/", "/nowhere"])
async def test_no_token_is_401_everywhere_else(served, path):
    assert await served.get(path) == (401, UNAUTHORIZED)
    assert served.reviews.token_reviews == []


@pytest.mark.parametrize("header", ["Basic Zm9vOmJhcg==", "Bearer", "Bearer   ", "good"])
async def test_a_header_that_is_not_a_bearer_token_is_401(served, header):
    assert await served.get("/metrics", Authorization=header) == (401, UNAUTHORIZED)


async def test_a_token_the_api_server_does_not_authenticate_is_401(served):
    assert await served.get("/metrics", "forged") == (401, UNAUTHORIZED)
    [review] = served.reviews.token_reviews
    assert review == {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "forged"}}
    assert served.reviews.access_reviews == []


async def test_the_reviews_go_with_the_operators_own_credentials(served):
    await served.get("/metrics", "good")
    assert served.reviews.auth_header == ["Bearer operator-token"]


async def test_a_user_without_the_rbac_is_403_with_upstreams_message(served):
    status, body = await served.get("/metrics", "norbac")
    assert (status, body) == (403, {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f'forbidden: User "{NOBODY}" cannot get path "/metrics"', "reason": "Forbidden",
        "details": {}, "code": 403})


async def test_a_user_with_the_rbac_gets_the_metrics(served):
    status, body = await served.get("/metrics", "good")
    assert status == 200
    assert "scheduler_schedule_attempts_total" in body
    [review] = served.reviews.access_reviews
    assert review == {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"}, "user": PROMETHEUS, "uid": "u-1",
        "groups": ["system:serviceaccounts", "system:authenticated"]}}


async def test_each_path_is_authorized_on_its_own(served):
    assert (await served.get("/debug/pending", "good"))[0] == 200
    assert (await served.get("/debug/overview", "good"))[0] == 403  # not in the grants
    assert [r["spec"]["nonResourceAttributes"]["path"] for r in served.reviews.access_reviews] == [
        "/debug/pending", "/debug/overview"]


async def test_answers_are_cached_ten_seconds_then_asked_again(served):
    for _ in range(5):
        assert (await served.get("/metrics", "good"))[0] == 200
        assert (await served.get("/metrics", "norbac"))[0] == 403
        assert (await served.get("/metrics", "forged"))[0] == 401
    assert (len(served.reviews.token_reviews), len(served.reviews.access_reviews)) == (3, 2)
    served.clock.now += 9.9
    await served.get("/metrics", "good")
    assert (len(served.reviews.token_reviews), len(served.reviews.access_reviews)) == (3, 2)
    served.clock.now += 0.2  # 10.1 s after the first answers
    await served.get("/metrics", "good")
    await served.get("/metrics", "forged")
    assert (len(served.reviews.token_reviews), len(served.reviews.access_reviews)) == (5, 3)


async def test_a_revoked_grant_is_refused_once_the_allowed_answer_expires(served):
    assert (await served.get("/metrics", "good"))[0] == 200
    served.reviews.grants.clear()
    assert (await served.get("/metrics", "good"))[0] == 200  # cached
    served.clock.now += 10.0
    assert (await served.get("/metrics", "good"))[0] == 403


async def test_concurrent_requests_share_one_review(served):
    results = await asyncio.gather(*(served.get("/metrics", "good") for _ in range(8)))
    assert [status for status, _ in results] == [200] * 8
    assert (len(served.reviews.token_reviews), len(served.reviews.access_reviews)) == (1, 1)


async def test_an_unanswered_token_review_is_401_and_not_cached(served):
    served.reviews.failing = True
    assert await served.get("/metrics", "good") == (401, UNAUTHORIZED)
    served.reviews.failing = False
    assert (await served.get("/metrics", "good"))[0] == 200


async def test_plain_http_on_the_secure_port_gets_no_answer(served):
    async with aiohttp.ClientSession() as plain:
        with pytest.raises(aiohttp.ClientError):
            async with plain.get(served.url.replace("https:", "http:") + "/healthz") as response:
                await response.read()


@pytest.mark.parametrize(("paths", "path", "allowed"), [
    (["/healthz"], "/healthz", True),
    (["/healthz"], "/healthz/ping", False),
    (["healthz"], "/healthz", True),
    (["/debug/*"], "/debug/pending/a/b", True),
    (["/debug/*"], "/debugger", False),
    (["/debug*"], "/debugger", True),
    (["*"], "/metrics", True),
    ([], "/healthz", False),
])
def test_always_allow_paths_match_as_upstream(paths, path, allowed):
    assert PathMatcher(paths)(path) is allowed


def test_a_star_inside_an_always_allowed_path_is_refused():
    with pytest.raises(ValueError, match=r"only trailing \* allowed in '/a\*/b'"):
        PathMatcher(["/a*/b"])


@pytest.mark.parametrize(("header", "token"), [
    ("Bearer abc", "abc"), ("bearer abc", "abc"), ("  Bearer   abc  ", "abc"), ("Basic abc", ""), ("", ""),
])
def test_bearer_token(header, token):
    assert bearer_token({"Authorization": header} if header else {}) == token


def test_user_info_is_hashable_with_extra():
    user = UserInfo("u", extra=(("scopes", ("a", "b")),))
    assert {user: 1}[UserInfo("u", extra=(("scopes", ("a", "b")),))] == 1


# -- the serving certificate ---------------------------------------------------------------


def test_a_cert_dir_keeps_the_generated_pair_across_starts(tmp_path):
    serving_context(cert_dir=str(tmp_path / "certs"))
    cert = (tmp_path / "certs" / "kopfsched.crt").read_bytes()
    assert oct((tmp_path / "certs" / "kopfsched.key").stat().st_mode & 0o777) == "0o600"
    serving_context(cert_dir=str(tmp_path / "certs"))
    assert (tmp_path / "certs" / "kopfsched.crt").read_bytes() == cert


def test_given_files_are_served(tmp_path):
    cert, key = self_signed(["kopfsched.example"])
    (tmp_path / "tls.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    assert serving_context(cert_file=str(tmp_path / "tls.crt"), key_file=str(tmp_path / "tls.key"))


def test_a_cert_without_its_key_is_one_line(tmp_path):
    with pytest.raises(ServingCertError, match=r"^--tls-cert-file and --tls-private-key-file must be given together$"):
        serving_context(cert_file=str(tmp_path / "tls.crt"))


def test_a_missing_cert_file_is_one_line(tmp_path):
    with pytest.raises(ServingCertError, match=f"^{tmp_path}/tls.crt: No such file or directory$"):
        serving_context(cert_file=str(tmp_path / "tls.crt"), key_file=str(tmp_path / "tls.key"))


def test_a_key_of_another_cert_is_one_line(tmp_path):
    cert, _ = self_signed(["a"])
    _, other_key = self_signed(["b"])
    (tmp_path / "tls.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(other_key)
    with pytest.raises(ServingCertError, match="not a matching PEM certificate and key"):
        serving_context(cert_file=str(tmp_path / "tls.crt"), key_file=str(tmp_path / "tls.key"))


def test_garbage_pem_is_one_line(tmp_path):
    (tmp_path / "tls.crt").write_text("not a certificate\n")
    (tmp_path / "tls.key").write_text("not a key\n")
    with pytest.raises(ServingCertError, match="not a matching PEM certificate and key"):
        serving_context(cert_file=str(tmp_path / "tls.crt"), key_file=str(tmp_path / "tls.key"))

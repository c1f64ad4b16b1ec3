"""Extenders that misbehave, and their TLS: garbage, wrong shapes and enormous answers are an
ExtenderError reported on the pod (never a crash of the cycle); the server's certificate is
verified unless `insecure`; a CA bundle that cannot be loaded is a configuration problem."""

from __future__ import annotations

import base64
import ssl
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from kopfsched.config.extenders import parse_extenders
from kopfsched.config.types import ExtenderConfig, Problem
from kopfsched.framework.types import PodInfo
from kopfsched.observability.secure import self_signed
from kopfsched.plugins.registry import in_tree_registry
from kopfsched.scheduler import extender as extender_module
from kopfsched.scheduler.extender import ExtenderError, HTTPExtender
from tests.builders import make_node, make_pod, node_info
from tests.harness import Harness, profile_from_spec

from .conftest import FakeExtender
from .test_scheduling import PROFILE, settle

NODES = [node_info(make_node(f"n{i}")) for i in (1, 2)]
POD = PodInfo(make_pod("p"))


async def call(config: ExtenderConfig, verb: str = "filter") -> Any:
    http = HTTPExtender(config)
    try:
        if verb == "filter":
            return await http.filter(POD, NODES)
        if verb == "prioritize":
            return await http.prioritize(POD, NODES)
        if verb == "bind":
            return await http.bind(POD, "n1")
        return await http.process_preemption(POD, {}, {"n1": NODES[0]})
    finally:
        await http.close()


def raw(text: bytes, content_type: str = "application/json") -> web.Response:
    return web.Response(body=text, content_type=content_type)


@pytest.mark.parametrize(("verb", "answer", "message"), [
    ("filter", raw(b"<html>oops</html>"), "filter answer of extender at URL {url}/filter is not JSON"),
    ("filter", raw(b""), "filter answer of extender at URL {url}/filter is not JSON"),
    ("filter", raw(b"[" * 100_000 + b"]" * 100_000), "filter answer of extender at URL {url}/filter is not JSON"),
    ("filter", [1, 2], "returned a filter result that is not an object"),
    ("filter", {"NodeNames": 5}, "returned a malformed filter answer: TypeError"),
    ("filter", {"Nodes": {"Items": ["n1"]}}, "returned a malformed filter answer: AttributeError"),
    ("filter", {"Nodes": {"Items": [{"metadata": {"name": "n9"}}]}}, "claims a filtered node 'n9'"),
    ("prioritize", {"Host": "n1"}, "returned a priority list that is not an array"),
    ("prioritize", [{"Host": "n1", "Score": "ten"}], "returned a malformed host priority"),
    ("preempt", {"NodeNameToMetaVictims": ["n1"]}, "returned a malformed preempt answer: AttributeError"),
    ("preempt", {"NodeNameToMetaVictims": {"n1": {"Pods": [], "NumPDBViolations": "many"}}},
     "returned a malformed preempt answer: ValueError"),
], ids=["html", "empty", "deeply-nested", "array", "names-not-a-list", "items-not-objects", "unknown-node",
        "priorities-not-a-list", "score-not-a-number", "victims-not-a-map", "violations-not-a-number"])
async def test_garbage_answers_are_extender_errors(extender: FakeExtender, verb, answer, message):
    extender.on(verb, lambda body: answer)
    config = ExtenderConfig(url_prefix=extender.url, node_cache_capable=True, **{f"{verb}_verb": verb})
    with pytest.raises(ExtenderError, match=message.format(url=extender.url).replace("[", r"\[").replace("(", r"\(")):
        await call(config, verb)


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_an_enormous_answer_is_cut_off(monkeypatch, chunked):
    monkeypatch.setattr(extender_module, "MAX_ANSWER_BYTES", 4096)

    async def handle(request: web.Request) -> web.StreamResponse:
        await request.read()
        if not chunked:
            return raw(b'{"NodeNames": [' + b'"n1",' * 2000 + b'"n2"]}')
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        for _ in range(100):  # would go on: cut off after 4096 bytes
            await response.write(b" " * 1024)
        return response

    app = web.Application()
    app.router.add_post("/filter", handle)
    server = TestServer(app, host="127.0.0.1", port=0)
    await server.start_server()
    url = str(server.make_url("")).rstrip("/")
    try:
        with pytest.raises(ExtenderError, match=f"filter answer of extender at URL {url}/filter is "
                                                f"(10\\d\\d\\d bytes, )?more than 4096"):
            await call(ExtenderConfig(url_prefix=url, filter_verb="filter", node_cache_capable=True))
    finally:
        await server.close()


async def test_a_garbage_answer_fails_the_pod_with_the_reason_and_scheduling_goes_on(extender: FakeExtender):
    extender.on("filter", lambda body: {"NodeNames": 7})
    registry = in_tree_registry()
    profile = profile_from_spec({"extenders": [{"urlPrefix": extender.url, "filterVerb": "filter",
                                                "nodeCacheCapable": True}]}, registry, name=PROFILE)
    h = Harness([make_node("n1")], profiles=[profile], registry=registry)
    try:
        h.add_pods(make_pod("p", scheduler_name=PROFILE))
        await settle(h)
        condition = h.condition("p")
        assert (h.node_of("p"), condition["reason"]) == (None, "SchedulerError")
        assert condition["message"] == (f"extender '{extender.url}' returned a malformed filter answer: "
                                        "TypeError: 'int' object is not iterable")
        extender.on("filter", lambda body: {"NodeNames": ["n1"]})
        h.add_pods(make_pod("q", scheduler_name=PROFILE))
        await settle(h)
        assert h.node_of("q") == "n1", "the loop goes on"
    finally:
        await h.scheduler.shutdown()


# -- TLS -----------------------------------------------------------------------------------


@pytest.fixture
async def https_extender(tmp_path) -> AsyncIterator[tuple[str, bytes]]:
    """An HTTPS extender on 127.0.0.1 with a self-signed certificate: (url, its PEM)."""
    cert, key = self_signed(["127.0.0.1"])
    (tmp_path / "tls.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    async def keep_n2(request: web.Request) -> web.Response:
        return web.json_response({"NodeNames": ["n2"]})

    app = web.Application()
    app.router.add_post("/filter", keep_n2)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context).start()
    try:
        yield f"https://127.0.0.1:{runner.addresses[0][1]}", cert
    finally:
        await runner.cleanup()


def configured(raw_extender: dict[str, Any]) -> ExtenderConfig:
    problems: list[Problem] = []
    [config] = parse_extenders([raw_extender], "extenders", problems)
    assert problems == []
    return config


async def test_https_without_a_ca_verifies_against_the_system_roots(https_extender):
    url, _ = https_extender
    config = configured({"urlPrefix": url, "filterVerb": "filter", "enableHTTPS": True, "nodeCacheCapable": True})
    with pytest.raises(ExtenderError, match="certificate verify failed"):
        await call(config)


async def test_the_configured_ca_is_trusted(https_extender):
    url, cert = https_extender
    config = configured({"urlPrefix": url, "filterVerb": "filter", "nodeCacheCapable": True,
                         "tlsConfig": {"caData": base64.b64encode(cert).decode()}})
    assert (await call(config)).node_names == ["n2"]


async def test_insecure_skips_verification(https_extender):
    url, _ = https_extender
    config = configured({"urlPrefix": url, "filterVerb": "filter", "nodeCacheCapable": True,
                         "tlsConfig": {"insecure": True}})
    assert (await call(config)).node_names == ["n2"]


@pytest.mark.parametrize(("tls", "problem"), [
    ({"caData": base64.b64encode(b"not a certificate").decode()},
     "extenders[0].tlsConfig.caData: not a PEM certificate bundle ("),
    ({"caFile": "/nonexistent/ca.crt"},
     "extenders[0].tlsConfig.caFile: /nonexistent/ca.crt: No such file or directory"),
    ({"certData": base64.b64encode(b"junk").decode(), "keyData": base64.b64encode(b"junk").decode()},
     "extenders[0].tlsConfig.certData: not a matching PEM client certificate and key ("),
], ids=["ca-data-garbage", "ca-file-missing", "client-pair-garbage"])
def test_a_malformed_ca_or_key_pair_is_a_configuration_problem(tls, problem):
    problems: list[Problem] = []
    assert parse_extenders([{"urlPrefix": "https://e.example", "tlsConfig": tls}], "extenders", problems) == ()
    [found] = problems
    assert f"{found.path}: {found.message}".startswith(problem)


def test_a_malformed_ca_file_is_a_configuration_problem(tmp_path):
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n")
    problems: list[Problem] = []
    parse_extenders([{"urlPrefix": "https://e.example", "tlsConfig": {"caFile": str(tmp_path / "ca.crt")}}],
                    "extenders", problems)
    assert [p.path for p in problems] == ["extenders[0].tlsConfig.caFile"]
    assert problems[0].message.startswith(f"{tmp_path}/ca.crt: not a PEM certificate bundle (")

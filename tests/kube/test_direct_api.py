"""DirectApi: the client's requests on the ApiClient's session, against a small HTTP server on
127.0.0.1 — what the server receives (token, headers, body, query) and how answers come back."""
from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client as k8s

from kopfsched.framework.client import ConflictError
from kopfsched.kube.client import KubeClusterClient
from tests.builders import make_pod


class FakeApiServer:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.answers: list[web.Response] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append({'method': request.method, 'path': request.path, 'query': dict(request.query),
                              'headers': request.headers.copy(), 'body': await request.read()})
        if self.answers:
            return self.answers.pop(0)
        return web.json_response({'kind': 'Status', 'status': 'Success'}, status=201)


async def serve(fake: FakeApiServer, token: str) -> tuple[TestServer, k8s.Configuration]:
    """`fake` on a free port of 127.0.0.1, and a client configuration for it with `token`."""
    app = web.Application()
    app.router.add_route('*', '/{tail:.*}', fake.handle)
    server = TestServer(app, host='127.0.0.1', port=0)
    await server.start_server()
    configuration = k8s.Configuration(host=str(server.make_url('')).rstrip('/'))
    configuration.api_key = {'BearerToken': token}
    configuration.api_key_prefix = {'BearerToken': 'Bearer'}
    return server, configuration


@pytest.fixture
async def served() -> AsyncIterator[tuple[FakeApiServer, KubeClusterClient]]:
    fake = FakeApiServer()
    server, configuration = await serve(fake, 'sekret')
    api = k8s.ApiClient(configuration)
    try:
        yield fake, KubeClusterClient(api, instance='test', retry_delays=(0.0,))
    finally:
        await api.close()
        await server.close()


async def test_a_bind_carries_the_token_the_headers_and_the_binding(
        served: tuple[FakeApiServer, KubeClusterClient]) -> None:
    fake, client = served
    await client.bind(pod=make_pod('p', uid='uid-p'), node_name='n1')
    [sent] = fake.requests
    assert (sent['method'], sent['path']) == ('POST', '/api/v1/namespaces/default/pods/p/binding')
    assert sent['headers']['authorization'] == 'Bearer sekret'
    assert sent['headers']['Content-Type'] == 'application/json'
    assert sent['headers']['Accept'] == 'application/json'
    assert sent['headers']['User-Agent'].startswith('OpenAPI-Generator')  # the ApiClient's default headers
    assert json.loads(sent['body']) == {
        'apiVersion': 'v1', 'kind': 'Binding', 'metadata': {'name': 'p', 'namespace': 'default', 'uid': 'uid-p'},
        'target': {'apiVersion': 'v1', 'kind': 'Node', 'name': 'n1'}}


async def test_answers_are_parsed_only_when_asked_for(served: tuple[FakeApiServer, KubeClusterClient]) -> None:
    fake, client = served
    fake.answers = [web.json_response({'items': [{'metadata': {'name': 'n1'}}]}),
                    web.Response(text='not json'),
                    web.json_response({'kind': 'Status'})]
    listed = await client.request('GET', '/api/v1/nodes', query={'limit': '500', 'continue': 'a b'})
    assert listed == {'items': [{'metadata': {'name': 'n1'}}]}
    assert fake.requests[0]['query'] == {'limit': '500', 'continue': 'a b'}
    assert await client.request('GET', '/version') == 'not json'
    assert await client.request('GET', '/version', response_type=None) is None


async def test_retry_after_and_errors_map_as_from_the_generated_client(
        served: tuple[FakeApiServer, KubeClusterClient]) -> None:
    fake, client = served
    fake.answers = [web.json_response({'message': 'slow down'}, status=429, headers={'Retry-After': '0'}),
                    web.json_response({'message': 'too late'}, status=409)]
    with pytest.raises(ConflictError, match=r'^binding default/p to n1: 409 Conflict: too late$'):
        await client.bind(pod=make_pod('p', uid='uid-p'), node_name='n1')
    assert len(fake.requests) == 2  # the 429 was retried after its Retry-After


async def test_a_server_error_is_retried_then_succeeds(served: tuple[FakeApiServer, KubeClusterClient]) -> None:
    fake, client = served
    fake.answers = [web.Response(status=503)]
    await client.patch_pod_status(pod=make_pod('p', uid='uid-p'), nominated_node_name='n1')
    assert [r['method'] for r in fake.requests] == ['PATCH', 'PATCH']
    assert fake.requests[1]['headers']['Content-Type'] == 'application/strategic-merge-patch+json'
    assert json.loads(fake.requests[1]['body']) == {'status': {'nominatedNodeName': 'n1'}}


async def test_a_refreshed_token_is_sent_within_a_second() -> None:
    """The token (and the configuration's refresh hook) is read at most once per AUTH_REFRESH
    seconds, so a rotated token reaches the server one second later at most."""
    from kopfsched.kube.client import AUTH_REFRESH, DirectApi
    fake = FakeApiServer()
    server, configuration = await serve(fake, 'first')
    refreshed: list[int] = []

    async def rotate(config: k8s.Configuration) -> None:
        refreshed.append(1)
        if len(refreshed) > 1:
            config.api_key = {'BearerToken': 'second'}
    configuration.refresh_api_key_hook = rotate
    api = k8s.ApiClient(configuration)
    now = [100.0]
    client = KubeClusterClient(DirectApi(api, clock=lambda: now[0]), instance='test')
    try:
        await client.bind(pod=make_pod('a'), node_name='n1')
        now[0] += AUTH_REFRESH / 2
        await client.bind(pod=make_pod('b'), node_name='n1')
        now[0] += AUTH_REFRESH
        await client.bind(pod=make_pod('c'), node_name='n1')
        await client.patch_pod_status(pod=make_pod('c'), nominated_node_name='n1')  # other headers, same token
        api.set_default_header('X-Extra', 'yes')
        now[0] += AUTH_REFRESH
        await client.bind(pod=make_pod('d'), node_name='n1')
    finally:
        await client.close()
        await api.close()
        await server.close()
    assert [r['headers']['authorization'] for r in fake.requests] == [
        'Bearer first', 'Bearer first', 'Bearer second', 'Bearer second', 'Bearer second']
    assert len(refreshed) == 3
    assert fake.requests[4]['headers']['X-Extra'] == 'yes'  # a default header set later shows within a second
    assert fake.requests[3]['headers']['Content-Type'] == 'application/strategic-merge-patch+json'

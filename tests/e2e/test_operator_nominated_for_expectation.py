"""NominatedNodeNameForExpectation over HTTP: what the API receives from the operator, in order.
A pod whose PreBind has work (a ResourceClaim to write) gets status.nominatedNodeName in a
status patch before the claim's writes and the binding, which clears it (as the API server
does, ClearingNominatedNodeNameAfterBinding); a plain pod gets no status patch; with
`--feature-gates NominatedNodeNameForExpectation=false` neither does the pod with a claim."""
from __future__ import annotations

import contextlib
import pathlib
from collections.abc import Iterator

import aiohttp
import pytest

from kopfsched import features
from kopfsched.emulator.server import FastKubernetesEmulator
from tests.builders import make_node, make_pod
from tests.e2e.operator_harness import eventually, node_of, post, running_operator
from tests.e2e.test_operator_dra import CLAIMS, PODS, gpu_pod, one_gpu_on_gpu_1_and_claim_first


@contextlib.contextmanager
def gates(text: str) -> Iterator[None]:
    """`--feature-gates` for the operator started inside (the CLI sets them the same way)."""
    saved = features.GATES
    features.set_gates(features.parse(text))
    try:
        yield
    finally:
        features.set_gates(saved)


def writes_about(emulator: FastKubernetesEmulator, *names: str) -> list[tuple[str, str, object]]:
    """(method, path, body of a pod status patch) of every write to these pods (pods/<name>...)
    and claims (claims/<name>...) after their creation, as the API received them."""
    out = []
    for m in emulator.mutations():
        if m.path.startswith(f'{PODS}/'):
            path = 'pods/' + m.path.removeprefix(f'{PODS}/')
        elif m.path.startswith(f'{CLAIMS}/'):
            path = 'claims/' + m.path.removeprefix(f'{CLAIMS}/')
        else:
            continue
        if path.split('/')[1] in names:
            out.append((m.method, path, m.body if path.startswith('pods/') and path.endswith('/status') else None))
    return out


@pytest.mark.parametrize('gate', ['', 'NominatedNodeNameForExpectation=false'], ids=['on', 'off'])
async def test_the_nomination_goes_out_before_prebind_writes_and_the_binding_clears_it(
        emulator: FastKubernetesEmulator, kubeconfig: pathlib.Path, http: aiohttp.ClientSession, gate: str) -> None:
    await post(http, '/api/v1/nodes', make_node('gpu-1'))
    await one_gpu_on_gpu_1_and_claim_first(http)
    with gates(gate):
        async with running_operator(kubeconfig):
            await post(http, PODS, gpu_pod('trainer', 'first'))
            await eventually(lambda: node_of(emulator, 'trainer'), what='trainer bound')
            await post(http, PODS, make_pod('plain', scheduler_name='kopfsched'))
            await eventually(lambda: node_of(emulator, 'plain'), what='plain bound')
    nomination = [('PATCH', 'pods/trainer/status', {'status': {'nominatedNodeName': 'gpu-1'}})] if not gate else []
    assert writes_about(emulator, 'trainer', 'first') == [
        *nomination,
        ('PATCH', 'claims/first', None),  # the finalizer
        ('PATCH', 'claims/first/status', None),  # allocation and reservedFor
        ('POST', 'pods/trainer/binding', None),
    ]
    assert 'nominatedNodeName' not in emulator.get_object('pods', 'default', 'trainer')['status']
    assert writes_about(emulator, 'plain') == [('POST', 'pods/plain/binding', None)]

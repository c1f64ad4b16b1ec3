"""Raw capacity of the API emulator: pods created and bound per second through kubernetes_asyncio.

    python -m benchmarks.raw_capacity --pods 2000                  # every hosting mode, one client
    python -m benchmarks.raw_capacity --pods 2000 --mode thread --concurrency 8

A plain client (no kopf) creates N pods, then binds each to one of 100 nodes, with `concurrency`
requests in flight; it runs in this process's loop. The emulator runs in that same loop (inloop),
in a thread of this process with its own loop (thread: what the pytest fixture does), or in a
subprocess (process). The run is bounded: it stops after N pods (or --timeout seconds).
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import pathlib
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from kubernetes_asyncio import client, config

from kopfsched.emulator.server import EmulatorThread, FastKubernetesEmulator, emulator_process, write_kubeconfig
from tests.builders import make_node, make_pod

MODES = ('inloop', 'thread', 'process')


@contextlib.asynccontextmanager
async def hosted(mode: str) -> AsyncIterator[str]:
    """The URL of an emulator hosted in the given mode, for as long as the context lasts."""
    if mode == 'inloop':
        emulator = FastKubernetesEmulator()
        url = await emulator.start()
        try:
            yield url
        finally:
            await emulator.stop()
    elif mode == 'thread':
        with EmulatorThread(FastKubernetesEmulator()) as emulator:
            yield emulator.url
    else:
        with emulator_process() as remote:
            yield remote.url


async def _run_all(calls: list[Callable[[], Awaitable[object]]], *, concurrency: int) -> float:
    queue = list(reversed(calls))

    async def worker() -> None:
        while queue:
            await queue.pop()()
    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started


async def measure(mode: str, *, pods: int, nodes: int, concurrency: int) -> dict[str, float | int | str]:
    async with hosted(mode) as url:
        with tempfile.TemporaryDirectory() as tmp:
            kubeconfig = write_kubeconfig(pathlib.Path(tmp) / 'kubeconfig', url=url)
            api = await config.new_client_from_config(config_file=str(kubeconfig))
        async with api:
            core = client.CoreV1Api(api)
            for i in range(nodes):
                await core.create_node(make_node(f'node-{i}'))
            creating = [lambda i=i: core.create_namespaced_pod('default', make_pod(f'pod-{i}')) for i in range(pods)]
            create_seconds = await _run_all(creating, concurrency=concurrency)
            binding = [lambda i=i: _bind(api, f'pod-{i}', f'node-{i % nodes}') for i in range(pods)]
            bind_seconds = await _run_all(binding, concurrency=concurrency)
            bound = sum(1 for p in (await core.list_namespaced_pod('default')).items if p.spec.node_name)
    if bound != pods:
        raise RuntimeError(f'{bound} of {pods} pods bound')
    return {'mode': mode, 'pods': pods, 'concurrency': concurrency,
            'creates_per_second': round(pods / create_seconds, 1), 'binds_per_second': round(pods / bind_seconds, 1)}


async def _bind(api: client.ApiClient, name: str, node: str) -> object:
    return await api.call_api(
        f'/api/v1/namespaces/default/pods/{name}/binding', 'POST',
        body={'apiVersion': 'v1', 'kind': 'Binding', 'metadata': {'name': name},
              'target': {'kind': 'Node', 'name': node}},
        header_params={'Content-Type': 'application/json', 'Accept': 'application/json'},
        response_types_map={201: 'V1Status'}, auth_settings=['BearerToken'], _return_http_data_only=True)


async def main_async(args: argparse.Namespace) -> None:
    for mode in MODES if args.mode == 'all' else (args.mode,):
        result = await asyncio.wait_for(
            measure(mode, pods=args.pods, nodes=args.nodes, concurrency=args.concurrency), args.timeout)
        print(json.dumps(result), flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--pods', type=int, default=2000)
    parser.add_argument('--nodes', type=int, default=100)
    parser.add_argument('--mode', choices=(*MODES, 'all'), default='all')
    parser.add_argument('--concurrency', type=int, default=1, help='requests in flight (1: one by one)')
    parser.add_argument('--timeout', type=float, default=300.0, help='give up a mode after this many seconds')
    asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == '__main__':
    main()

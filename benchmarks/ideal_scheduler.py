"""The least a scheduler can ask of the API server per pod, as a yardstick (not a test).

    python -m benchmarks.ideal_scheduler URL SCHEDULER_NAME NODES PODS

A process that does what any scheduler must do for each pod and nothing else: it lists and
watches pods (kube-scheduler's field selector, as `kopfsched run` does), and for each new pod
of SCHEDULER_NAME without a node it posts a binding to `node-<i % NODES>` and then queues the
`Scheduled` Event (events.k8s.io/v1, the operator's body), which four sender tasks post beside
the binds, sharing one connection pool with them. No scheduling algorithm, no cache, no kopf:
plain aiohttp and orjson. It prints `ready` once its watch is open, `bound` once PODS pods are
bound, then `done` once their Events are posted, and exits.

`e2e_throughput --ceiling` runs it against the same emulator and driver as the operator: the
rate it reaches is about what a scheduler costing next to nothing reaches there, since the
emulator's work per pod (the create, the bind, two watch events, the Events) is the same. Not a
strict ceiling: how many of its Events go out while pods are still being bound (its binds and
Events queue for the same connections, so that varies from run to run) moves its rate by half,
and its clock stops at its last bind, where the operator's stops at the next metrics scrape.
"""
from __future__ import annotations

import asyncio
import collections
import datetime
import sys
import time
from typing import Any

import aiohttp
import orjson

FIELD_SELECTOR = 'status.phase!=Succeeded,status.phase!=Failed'
EVENT_SENDERS = 4
HEADERS = {'Content-Type': 'application/json', 'Accept': 'application/json'}


class IdealScheduler:
    def __init__(self, session: aiohttp.ClientSession, url: str, scheduler: str, nodes: int, pods: int) -> None:
        self.session, self.url, self.scheduler = session, url, scheduler
        self.nodes, self.pods = nodes, pods
        self.bound = self.assigned = 0
        self.all_bound = asyncio.Event()
        self.events: collections.deque[dict[str, Any]] = collections.deque()
        self.senders = 0
        self.tasks: set[asyncio.Task[None]] = set()

    async def post(self, path: str, body: dict[str, Any]) -> None:
        async with self.session.post(self.url + path, data=orjson.dumps(body), headers=HEADERS) as response:
            await response.read()
            if response.status >= 300:
                raise RuntimeError(f'POST {path}: {response.status}')

    async def run(self) -> None:
        async with self.session.get(f'{self.url}/api/v1/pods', params={'fieldSelector': FIELD_SELECTOR}) as response:
            listed = orjson.loads(await response.read())
        params = {'watch': 'true', 'fieldSelector': FIELD_SELECTOR,
                  'resourceVersion': listed['metadata']['resourceVersion'], 'allowWatchBookmarks': 'true'}
        async with self.session.get(f'{self.url}/api/v1/pods', params=params,
                                    timeout=aiohttp.ClientTimeout(total=None)) as watch:
            print('ready', flush=True)
            async for line in watch.content:
                if line.strip():
                    self.on_event(orjson.loads(line))
                if self.all_bound.is_set():
                    break
        print('bound', flush=True)
        while self.tasks:
            await asyncio.gather(*self.tasks)
        print('done', flush=True)

    def on_event(self, event: dict[str, Any]) -> None:
        pod = event['object']
        if event['type'] != 'ADDED' or pod['spec'].get('schedulerName') != self.scheduler or \
                pod['spec'].get('nodeName'):
            return
        self.assigned += 1
        self.spawn(self.bind(pod, f'node-{self.assigned % self.nodes}'))

    def spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def bind(self, pod: dict[str, Any], node: str) -> None:
        meta = pod['metadata']
        await self.post(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/binding", {
            'apiVersion': 'v1', 'kind': 'Binding', 'metadata': {'name': meta['name'], 'namespace': meta['namespace']},
            'target': {'apiVersion': 'v1', 'kind': 'Node', 'name': node}})
        self.bound += 1
        if self.bound >= self.pods:
            self.all_bound.set()
        self.events.append(scheduled_event(pod, node, self.scheduler))
        if self.senders < EVENT_SENDERS:
            self.senders += 1
            self.spawn(self.send_events())

    async def send_events(self) -> None:
        try:
            while self.events:
                event = self.events.popleft()
                await self.post(f"/apis/events.k8s.io/v1/namespaces/{event['metadata']['namespace']}/events", event)
        finally:
            self.senders -= 1


def scheduled_event(pod: dict[str, Any], node: str, scheduler: str) -> dict[str, Any]:
    meta = pod['metadata']
    now = datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%dT%H:%M:%S.%fZ')
    return {
        'apiVersion': 'events.k8s.io/v1', 'kind': 'Event',
        'metadata': {'name': f"{meta['name']}.{time.time_ns():x}", 'namespace': meta['namespace']},
        'eventTime': now, 'reportingController': scheduler, 'reportingInstance': f'{scheduler}-ideal',
        'action': 'Binding', 'reason': 'Scheduled', 'type': 'Normal',
        'note': f"Successfully assigned {meta['namespace']}/{meta['name']} to {node}",
        'regarding': {'apiVersion': 'v1', 'kind': 'Pod', 'namespace': meta['namespace'], 'name': meta['name'],
                      'uid': meta.get('uid'), 'resourceVersion': meta.get('resourceVersion')},
    }


async def main_async(url: str, scheduler: str, nodes: int, pods: int) -> None:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=100)) as session:
        await IdealScheduler(session, url, scheduler, nodes, pods).run()


def main(argv: list[str] | None = None) -> None:
    url, scheduler, nodes, pods = argv if argv is not None else sys.argv[1:]
    asyncio.run(main_async(url, scheduler, int(nodes), int(pods)))


if __name__ == '__main__':
    main()

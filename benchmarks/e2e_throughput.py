"""End-to-end throughput and memory of the real operator against the emulator (not a test).

    python -m benchmarks.e2e_throughput                  # 2000 pods on 100 nodes; RSS with 5000 pods, 500 nodes
    python -m benchmarks.e2e_throughput --pods 500 --rss-pods 1000 --rss-nodes 100
    python -m benchmarks.e2e_throughput --scale          # 5000 nodes, 50 000 running pods, then 5000 new pods
    python -m benchmarks.e2e_throughput --profile /tmp/operator.txt   # + py-spy samples of the operator
    python -m benchmarks.e2e_throughput --rss-pods 0 --ceiling   # + the ideal scheduler in the operator's place

Three processes, as in a cluster: the emulator, `kopfsched run` (started as a user would, with a
KubeSchedulerConfiguration raising the client QPS so the rate limiter is not what is measured),
and this driver, a plain aiohttp client with --concurrency requests in flight.

Phase 1, raw capacity: the driver creates and binds the pods itself against a fresh emulator.
Phase 2, end to end: a fresh emulator, the operator running, the driver creates the pods; the clock
stops when the operator's metrics count every pod scheduled (each pod: a bind and a `Scheduled`
Event). Phase 3: RSS of the operator once its cache holds --rss-pods bound pods on --rss-nodes nodes.

With --scale instead: one emulator holding --scale-nodes nodes and --scale-running bound pods; the
raw capacity is measured on it first (--scale-pods pods created and bound by the driver, left
running), then the operator starts: seconds until /readyz answers 200, the operator's CPU seconds
by then (all threads, and its main thread), its RSS, and the rate at which it binds --scale-pods
new pods.

Besides rates, each phase reports CPU milliseconds per pod: the operator's, split into its main
thread (the scheduling loop: cycles, binds, Events, watch events) and its other threads (kopf's
watch streams), the emulator's and this driver's. On a shared machine these move far less than
rates do, and they show where a ratio is lost: the operator's threads share one GIL, so its CPU per
pod bounds its rate; the emulator does more per pod end to end (an Event per pod, watch streams)
than in the raw phase. Each result ends with the machine's 1-minute load average at the start and
at the end (`load_average`): on a shared machine the rates and the ratio move with it, and one
pair says little; `--runs N` repeats the raw and end-to-end phases in turn and ends with the
medians. `cpu_ratio` is the raw phase's CPU per pod (emulator and driver) over the end-to-end
phase's (emulator, driver, operator): the ratio a CPU-bound machine would show, steadier than it.

With --ceiling, each run (and --scale) also puts `benchmarks.ideal_scheduler` in the operator's
place: a process that lists and watches pods, binds each and posts its `Scheduled` Event, and does
nothing else. Its rate (`ideal_pods_per_second`, `ideal_ratio`) is about what a scheduler costing
next to nothing reaches against the same emulator and driver in the same minutes (its docstring
says what moves it), and `of_ideal` the operator's rate as a share of it. `emulator_ceiling`, in
every result, is the emulator's CPU per pod in the raw phase over that in the end-to-end phase: the
emulator serves on one thread, busy nearly all the raw phase, so no scheduler's ratio passes it
while the emulator does that much more per pod end to end (the watch events, the Events).

With --profile FILE, py-spy samples the operator (every thread) during the end-to-end phase and
FILE gets the functions where the samples fall, most first, per thread (a thread waiting to get the
GIL back after a send() shows there as "in" the write: compare with the CPU figures). With
E2E_OPERATOR_CPROFILE=FILE in the environment, the operator's main thread runs under cProfile with a
thread-CPU-time clock, written to FILE at exit. Every phase is bounded by --timeout and the
processes are always stopped.
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import pathlib
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import aiohttp

from kopfsched.emulator.server import emulator_process, write_kubeconfig
from tests.builders import make_node, make_pod
from tests.e2e.operator_harness import free_port

ROOT = pathlib.Path(__file__).parents[1]
SCHEDULER = 'kopfsched-bench'
CONFIG = {
    'apiVersion': 'kubescheduler.config.k8s.io/v1', 'kind': 'KubeSchedulerConfiguration',
    'clientConnection': {'qps': 5000, 'burst': 10000},
    'profiles': [{'schedulerName': SCHEDULER}],
}
KEEP_LOG = os.environ.get('E2E_OPERATOR_LOG')
"""Where to keep the last operator's log (e.g. to see why a run timed out)."""
CPROFILE = os.environ.get('E2E_OPERATOR_CPROFILE')
"""Where to write a cProfile of the operator's main thread (the scheduling loop) over the whole run,
in CPU time of that thread."""
CPROFILE_MAIN = """
import cProfile, runpy, sys, time
profile = cProfile.Profile(time.thread_time)  # CPU time: waits for the GIL or the CPU do not count
output, sys.argv = sys.argv[1], ['kopfsched', *sys.argv[2:]]
profile.enable()
try:
    runpy.run_module('kopfsched', run_name='__main__')
except SystemExit:
    pass
finally:
    profile.disable()
    profile.dump_stats(output)
"""
JSON_HEADERS = {'Content-Type': 'application/json', 'Accept': 'application/json'}


async def _run_all(calls: list[Callable[[], Awaitable[object]]], *, concurrency: int) -> None:
    """Run the calls with `concurrency` in flight."""
    queue = list(reversed(calls))

    async def worker() -> None:
        while queue:
            await queue.pop()()
    await asyncio.gather(*(worker() for _ in range(concurrency)))


class Driver:
    """A plain aiohttp client (no kubernetes client library, no proxy lookups): what the API
    server can take from one client is the yardstick."""

    def __init__(self, session: aiohttp.ClientSession, url: str) -> None:
        self.session = session
        self.url = url

    async def post(self, path: str, body: dict[str, Any]) -> None:
        async with self.session.post(self.url + path, data=json.dumps(body), headers=JSON_HEADERS) as response:
            if response.status >= 300:
                raise RuntimeError(f'POST {path}: {response.status} {await response.text()}')
            await response.read()

    async def get(self, path: str) -> Any:
        async with self.session.get(self.url + path, headers=JSON_HEADERS) as response:
            return await response.json()

    async def create_node(self, node: dict[str, Any]) -> None:
        await self.post('/api/v1/nodes', node)

    async def create_pod(self, pod: dict[str, Any]) -> None:
        namespace = pod['metadata'].get('namespace') or 'default'
        await self.post(f'/api/v1/namespaces/{namespace}/pods', pod)

    async def bind(self, name: str, node: str, namespace: str = 'default') -> None:
        await self.post(f'/api/v1/namespaces/{namespace}/pods/{name}/binding', {
            'apiVersion': 'v1', 'kind': 'Binding', 'metadata': {'name': name},
            'target': {'kind': 'Node', 'name': node}})

    async def unbound(self, namespace: str) -> list[str]:
        listed = await self.get(f'/api/v1/namespaces/{namespace}/pods')
        return [p['metadata']['name'] for p in listed['items'] if not p['spec'].get('nodeName')]


@contextlib.asynccontextmanager
async def driver_for(url: str, concurrency: int):  # type: ignore[no-untyped-def]
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        yield Driver(session, url)


@contextlib.contextmanager
def operator_process(kubeconfig: pathlib.Path, tmp: pathlib.Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    config_file = tmp / 'config.json'
    config_file.write_text(json.dumps(CONFIG))
    port = free_port()
    log = (tmp / 'operator.log').open('wb')
    cprofile = ['-c', CPROFILE_MAIN, CPROFILE] if CPROFILE else ['-m', 'kopfsched']
    process = subprocess.Popen(
        [sys.executable, *cprofile, 'run', '--kubeconfig', str(kubeconfig),
         '--config', str(config_file), '--no-leader-elect', '--metrics-port', str(port)],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield process, port
    finally:
        _stop(process)
        log.close()
        if KEEP_LOG:
            shutil.copyfile(tmp / 'operator.log', KEEP_LOG)


@contextlib.contextmanager
def sampling(pid: int, output: str | None) -> Iterator[None]:
    """py-spy record of every thread of `pid` while the context lasts, summarised into `output`."""
    if output is None:
        yield
        return
    py_spy = shutil.which('py-spy')
    if py_spy is None:
        raise SystemExit('--profile needs py-spy (pip install py-spy)')
    raw = output + '.raw'
    recorder = subprocess.Popen([py_spy, 'record', '--threads', '--nonblocking', '--format', 'raw', '--rate', '200',
                                 '-o', raw, '--pid', str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        recorder.send_signal(signal.SIGINT)
        try:
            recorder.wait(timeout=30)
        except subprocess.TimeoutExpired:
            recorder.kill()
        if os.path.exists(raw):
            pathlib.Path(output).write_text(summarise(pathlib.Path(raw).read_text()))


def summarise(collapsed: str, top: int = 40) -> str:
    """Per thread: its share of the samples, then the functions most often on its stacks
    (inclusive) and at their tops (exclusive)."""
    threads: collections.Counter[str] = collections.Counter()
    inclusive: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    exclusive: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for line in collapsed.splitlines():
        stack, _, count_text = line.rpartition(' ')
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack.split(';')
        # 'thread (123): MainThread'; the default executor's threads are counted together.
        thread = re.sub(r'_\d+$', '_*', frames[0].partition('): ')[2] or frames[0])
        functions = [re.sub(r' \((?:[^()]*/)?([^()/]+):\d+\)$', r' (\1)', f) for f in frames[1:]]
        threads[thread] += count
        for function in set(functions):
            inclusive[thread][function] += count
        if functions:
            exclusive[thread][functions[-1]] += count
    total = sum(threads.values()) or 1
    lines = [f'{total} samples']
    for thread, count in threads.most_common():
        lines.append(f'\n== {thread}: {count} samples ({100 * count / total:.0f}%)')
        lines.append('-- inclusive')
        lines += [f'{100 * n / count:5.1f}%  {f}' for f, n in inclusive[thread].most_common(top)]
        lines.append('-- exclusive')
        lines += [f'{100 * n / count:5.1f}%  {f}' for f, n in exclusive[thread].most_common(top // 2)]
    return '\n'.join(lines) + '\n'


async def _metric(session: aiohttp.ClientSession, port: int, pattern: str) -> float:
    """The sample matching `pattern`, from an exposition restricted to its family (`name[]`)."""
    family = pattern.partition('{')[0]
    try:
        async with session.get(f'http://127.0.0.1:{port}/metrics', params={'name[]': family}) as response:
            text = await response.text()
    except aiohttp.ClientError:
        return -1.0
    match = re.search(pattern + r' ([0-9.e+]+)', text)
    return float(match.group(1)) if match else 0.0


async def _until(session: aiohttp.ClientSession, port: int, pattern: str, value: float, *, deadline: float) -> None:
    """Until the metric reaches `value`. A whole /metrics rendering costs the operator's loop
    several ms (every histogram): scraping it five times a second took a tenth of the loop's CPU
    while it bound pods, and even timed scrapes (15 in a run of 2000 pods) 1-3 %, where Prometheus
    scrapes every 15-30 s. So each scrape asks for the one family read (`?name[]=`, well under a
    millisecond) and the next is timed for when half of what is left should be done at the rate so
    far: 0.1 to 1 s apart."""
    started = time.monotonic()
    while (reached := await _metric(session, port, pattern)) < value:
        now = time.monotonic()
        if now > deadline:
            raise TimeoutError(f'{pattern} did not reach {value}')
        rate = reached / (now - started) if reached > 0 else 0.0
        await asyncio.sleep(min(1.0, max(0.1, 0.5 * (value - reached) / rate if rate else 0.5)))


async def _ready(session: aiohttp.ClientSession, port: int, *, deadline: float) -> None:
    while True:
        with contextlib.suppress(aiohttp.ClientError):
            async with session.get(f'http://127.0.0.1:{port}/readyz') as response:
                if response.status == 200:
                    return
        if time.monotonic() > deadline:
            raise TimeoutError('the operator never became ready')
        await asyncio.sleep(0.05)


def _cpu_seconds(pid: int, tid: int | None = None, *, kernel_only: bool = False) -> float:
    """User + system CPU time the process (or one of its threads) has used (robust where wall
    time is not: a machine shared with other work slows every process, not the work each one
    does per pod); with `kernel_only`, the system time alone."""
    stat = f'/proc/{pid}/stat' if tid is None else f'/proc/{pid}/task/{tid}/stat'
    fields = pathlib.Path(stat).read_text().rpartition(')')[2].split()
    return (int(fields[12]) + (0 if kernel_only else int(fields[11]))) / os.sysconf('SC_CLK_TCK')


def _emulator_pid() -> int:
    """The emulator subprocess this driver started (the newest, if several)."""
    found = []
    for stat in pathlib.Path('/proc').glob('[0-9]*/stat'):
        with contextlib.suppress(OSError):
            if int(stat.read_text().rpartition(')')[2].split()[1]) == os.getpid() and \
                    b'kopfsched.emulator.server' in (stat.parent / 'cmdline').read_bytes():
                found.append(int(stat.parent.name))
    return max(found)


class CpuMeter:
    """CPU milliseconds per pod spent while the context lasts, by the operator's main thread (the
    scheduling loop), its other threads together (kopf's), the emulator and this driver: on a
    shared 2-core machine, what each costs per pod tells more than rates do."""

    def __init__(self, operator_pid: int | None, emulator_pid: int, *, scheduler: str = 'operator') -> None:
        self.pids = {'emulator': emulator_pid}
        if operator_pid is not None:
            self.pids[scheduler] = operator_pid
        self.start: dict[str, float] = {}

    def _read(self) -> dict[str, float]:
        read = {name: _cpu_seconds(pid) for name, pid in self.pids.items()}
        if 'operator' in self.pids:
            pid = self.pids['operator']
            read['operator_main_thread'] = _cpu_seconds(pid, pid)
            read['operator_main_thread_kernel'] = _cpu_seconds(pid, pid, kernel_only=True)
        read['driver'] = time.process_time()
        return read

    def __enter__(self) -> CpuMeter:
        self.start = self._read()
        return self

    def __exit__(self, *_: object) -> None:
        self.end = self._read()

    def per_pod(self, pods: int) -> dict[str, float]:
        spent = {name: self.end[name] - self.start[name] for name in self.start}
        if 'operator' in spent:
            spent['operator_other_threads'] = spent['operator'] - spent['operator_main_thread']
        return {f'{name}_cpu_ms_per_pod': round(1000 * seconds / pods, 2) for name, seconds in spent.items()}


def _rss_mb(pid: int) -> float:
    for line in pathlib.Path(f'/proc/{pid}/status').read_text().splitlines():
        if line.startswith('VmRSS:'):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


SCHEDULED = rf'scheduler_schedule_attempts_total{{profile="{SCHEDULER}",result="scheduled"}}'


def _measured_pod(name: str, namespace: str = 'default') -> dict[str, Any]:
    return make_pod(name, namespace, scheduler_name=SCHEDULER, requests={'cpu': '10m'})


async def _create_and_bind(driver: Driver, *, pods: int, nodes: int, concurrency: int, prefix: str = 'pod',
                           namespace: str = 'default') -> float:
    """The raw capacity: pods created then bound per second by the driver alone."""
    started = time.perf_counter()
    await _run_all([lambda i=i: driver.create_pod(make_pod(f'{prefix}-{i}', namespace)) for i in range(pods)],
                   concurrency=concurrency)
    await _run_all([lambda i=i: driver.bind(f'{prefix}-{i}', f'node-{i % nodes}', namespace) for i in range(pods)],
                   concurrency=concurrency)
    return pods / (time.perf_counter() - started)


async def raw_capacity(*, pods: int, nodes: int, concurrency: int) -> tuple[float, dict[str, float]]:
    with emulator_process() as remote:
        async with driver_for(remote.url, concurrency) as driver:
            await _run_all([lambda i=i: driver.create_node(make_node(f'node-{i}')) for i in range(nodes)],
                           concurrency=concurrency)
            with CpuMeter(None, _emulator_pid()) as cpu:
                rate = await _create_and_bind(driver, pods=pods, nodes=nodes, concurrency=concurrency)
            return rate, cpu.per_pod(pods)


async def _operator_binds(driver: Driver, session: aiohttp.ClientSession, port: int, *, pods: int, namespace: str,
                          concurrency: int, deadline: float) -> float:
    """Pods bound per second by the operator: from the first create to the last one scheduled."""
    started = time.perf_counter()
    await _run_all([lambda i=i: driver.create_pod(_measured_pod(f'pod-{i}', namespace)) for i in range(pods)],
                   concurrency=concurrency)
    await _until(session, port, SCHEDULED, pods, deadline=deadline)
    seconds = time.perf_counter() - started
    unbound = await driver.unbound(namespace)
    if unbound:
        raise RuntimeError(f'{len(unbound)} pods were not bound')
    return pods / seconds


@contextlib.contextmanager
def ideal_process(url: str, *, nodes: int, pods: int) -> Iterator[subprocess.Popen[bytes]]:
    """`benchmarks.ideal_scheduler`: a bind and an Event per pod, nothing else."""
    process = subprocess.Popen([sys.executable, '-m', 'benchmarks.ideal_scheduler', url, SCHEDULER, str(nodes),
                                str(pods)], cwd=ROOT, stdout=subprocess.PIPE)
    try:
        yield process
    finally:
        _stop(process)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it has not exited within 20 s."""
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()


async def _said(process: subprocess.Popen[bytes], word: str, *, deadline: float) -> None:
    """Until the process prints `word` on a line of its own."""
    assert process.stdout is not None
    while (line := await asyncio.wait_for(asyncio.to_thread(process.stdout.readline),
                                          max(0.1, deadline - time.monotonic()))) != f'{word}\n'.encode():
        if not line:
            raise RuntimeError(f'the ideal scheduler ended before saying {word!r}')


async def _ideal_binds(driver: Driver, process: subprocess.Popen[bytes], *, pods: int, namespace: str,
                       concurrency: int, deadline: float) -> float:
    """Pods bound per second by the ideal scheduler: from the first create to its last bind."""
    started = time.perf_counter()
    creating = asyncio.ensure_future(_run_all(
        [lambda i=i: driver.create_pod(_measured_pod(f'pod-{i}', namespace)) for i in range(pods)],
        concurrency=concurrency))
    await _said(process, 'bound', deadline=deadline)
    seconds = time.perf_counter() - started
    await creating
    unbound = await driver.unbound(namespace)
    if unbound:
        raise RuntimeError(f'{len(unbound)} pods were not bound')
    return pods / seconds


async def _ideal_phase(url: str, driver: Driver, *, nodes: int, pods: int, namespace: str, concurrency: int,
                       timeout: float) -> tuple[float, dict[str, float]]:
    deadline = time.monotonic() + timeout
    with ideal_process(url, nodes=nodes, pods=pods) as process:
        await _said(process, 'ready', deadline=deadline)
        with CpuMeter(process.pid, _emulator_pid(), scheduler='ideal') as cpu:
            rate = await _ideal_binds(driver, process, pods=pods, namespace=namespace, concurrency=concurrency,
                                      deadline=deadline)
        await _said(process, 'done', deadline=deadline)
    return rate, cpu.per_pod(pods)


async def ceiling(*, pods: int, nodes: int, concurrency: int, timeout: float) -> tuple[float, dict[str, float]]:
    """The end-to-end phase with the ideal scheduler in the operator's place."""
    with emulator_process() as remote:
        async with driver_for(remote.url, concurrency) as driver:
            await _run_all([lambda i=i: driver.create_node(make_node(f'node-{i}')) for i in range(nodes)],
                           concurrency=concurrency)
            return await _ideal_phase(remote.url, driver, nodes=nodes, pods=pods, namespace='default',
                                      concurrency=concurrency, timeout=timeout)


async def end_to_end(*, pods: int, nodes: int, concurrency: int, timeout: float,
                     profile: str | None) -> tuple[float, float, dict[str, float]]:
    with emulator_process() as remote, tempfile.TemporaryDirectory() as tmp:
        kubeconfig = write_kubeconfig(pathlib.Path(tmp) / 'kubeconfig', url=remote.url)
        async with driver_for(remote.url, concurrency) as driver, aiohttp.ClientSession() as session:
            await _run_all([lambda i=i: driver.create_node(make_node(f'node-{i}')) for i in range(nodes)],
                           concurrency=concurrency)
            with operator_process(kubeconfig, pathlib.Path(tmp)) as (process, port):
                deadline = time.monotonic() + timeout
                await _ready(session, port, deadline=deadline)
                with sampling(process.pid, profile), CpuMeter(process.pid, _emulator_pid()) as cpu:
                    rate = await _operator_binds(driver, session, port, pods=pods, namespace='default',
                                                 concurrency=concurrency, deadline=deadline)
                return rate, _rss_mb(process.pid), cpu.per_pod(pods)


async def rss_with_cache(*, pods: int, nodes: int, concurrency: int, timeout: float) -> dict[str, float]:
    with emulator_process() as remote, tempfile.TemporaryDirectory() as tmp:
        kubeconfig = write_kubeconfig(pathlib.Path(tmp) / 'kubeconfig', url=remote.url)
        async with driver_for(remote.url, concurrency) as driver, aiohttp.ClientSession() as session:
            await _populate(driver, nodes=nodes, pods=pods, concurrency=concurrency, cpu='64')
            with operator_process(kubeconfig, pathlib.Path(tmp)) as (process, port):
                deadline = time.monotonic() + timeout
                await _ready(session, port, deadline=deadline)
                await _until(session, port, r'scheduler_cache_size{type="pods"}', pods, deadline=deadline)
                at_ready = _rss_mb(process.pid)
                await asyncio.sleep(7)  # kopf's per-object workers idle out after 5 s
                settled = _rss_mb(process.pid)
            return {'rss_mb_at_ready': at_ready, 'rss_mb_settled': settled}


async def _populate(driver: Driver, *, nodes: int, pods: int, concurrency: int, cpu: str) -> None:
    """Nodes, and pods already running on them (created with spec.nodeName, as scheduler_perf's)."""
    await _run_all([lambda i=i: driver.create_node(make_node(f'node-{i}', cpu=cpu, pods=110))
                    for i in range(nodes)], concurrency=concurrency)
    await _run_all([lambda i=i: driver.create_pod(make_pod(
        f'running-{i}', 'running', node_name=f'node-{i % nodes}', requests={'cpu': '100m', 'memory': '128Mi'}))
        for i in range(pods)], concurrency=concurrency)


async def at_scale(*, nodes: int, running: int, pods: int, concurrency: int, timeout: float,
                   profile: str | None, with_ceiling: bool = False) -> dict[str, Any]:
    """5000 nodes and 50 000 running pods: readiness, memory, then binding --scale-pods new pods."""
    with emulator_process(history_size=1000) as remote, tempfile.TemporaryDirectory() as tmp:
        kubeconfig = write_kubeconfig(pathlib.Path(tmp) / 'kubeconfig', url=remote.url)
        async with driver_for(remote.url, concurrency) as driver, aiohttp.ClientSession() as session:
            started = time.perf_counter()
            await _populate(driver, nodes=nodes, pods=running, concurrency=concurrency, cpu='64')
            populated = time.perf_counter() - started
            with CpuMeter(None, _emulator_pid()) as raw_meter:
                raw = await _create_and_bind(driver, pods=pods, nodes=nodes, concurrency=concurrency, prefix='raw',
                                             namespace='raw')
            raw_cpu = raw_meter.per_pod(pods)
            with operator_process(kubeconfig, pathlib.Path(tmp)) as (process, port):
                started = time.perf_counter()
                deadline = time.monotonic() + timeout
                if profile is not None:
                    await asyncio.sleep(0.5)  # py-spy attaches once the interpreter runs
                with sampling(process.pid, None if profile is None else profile + '.startup'):
                    await _ready(session, port, deadline=deadline)
                ready = time.perf_counter() - started
                ready_cpu = _cpu_seconds(process.pid), _cpu_seconds(process.pid, process.pid)
                rss_ready = _rss_mb(process.pid)
                with sampling(process.pid, profile), CpuMeter(process.pid, _emulator_pid()) as cpu:
                    rate = await _operator_binds(driver, session, port, pods=pods, namespace='measured',
                                                 concurrency=concurrency, deadline=deadline)
                rss_after = _rss_mb(process.pid)
            ideal = None
            if with_ceiling:
                ideal = await _ideal_phase(remote.url, driver, nodes=nodes, pods=pods, namespace='ideal',
                                           concurrency=concurrency, timeout=timeout)
        return {'nodes': nodes, 'running_pods': running + pods, 'pods': pods, 'populate_seconds': round(populated, 1),
                'ready_seconds': round(ready, 1), 'operator_cpu_seconds_at_ready': round(ready_cpu[0], 1),
                'operator_main_thread_cpu_seconds_at_ready': round(ready_cpu[1], 1),
                'operator_rss_mb_at_ready': rss_ready,
                'operator_rss_mb_after_run': rss_after, 'raw_pods_per_second': round(raw, 1),
                'e2e_pods_per_second': round(rate, 1), 'ratio': round(rate / raw, 2),
                'cpu_ratio': _cpu_ratio(raw_cpu, cpu.per_pod(pods)),
                'emulator_ceiling': _emulator_ceiling(raw_cpu, cpu.per_pod(pods)), **cpu.per_pod(pods), 'raw': raw_cpu,
                **(_ceiling_figures(rate, raw, raw_cpu, *ideal) if ideal else {})}


MEDIAN_OF = ('raw_pods_per_second', 'e2e_pods_per_second', 'ratio', 'cpu_ratio', 'operator_cpu_ms_per_pod',
             'operator_main_thread_cpu_ms_per_pod', 'operator_other_threads_cpu_ms_per_pod', 'emulator_cpu_ms_per_pod',
             'emulator_ceiling', 'ideal_pods_per_second', 'ideal_ratio', 'of_ideal')


def _ceiling_figures(rate: float, raw: float, raw_cpu: dict[str, float], ideal: float,
                     ideal_cpu: dict[str, float]) -> dict[str, Any]:
    """The ideal scheduler's rate, its ratio to the raw capacity, and the operator's rate as a
    share of it; with the ideal scheduler's CPU figures."""
    return {'ideal_pods_per_second': round(ideal, 1), 'ideal_ratio': round(ideal / raw, 2),
            'of_ideal': round(rate / ideal, 2),
            'ideal': {**ideal_cpu, 'cpu_ratio': _cpu_ratio(raw_cpu, ideal_cpu, scheduler='ideal'),
                      'emulator_ceiling': _emulator_ceiling(raw_cpu, ideal_cpu)}}


def _cpu_ratio(raw: dict[str, float], e2e: dict[str, float], *, scheduler: str = 'operator') -> float:
    """CPU per pod of the raw phase (emulator and driver) over that of the end-to-end phase (emulator,
    driver and operator): the ratio the rates would show if every process only waited for the CPU,
    as on a busy shared machine they mostly do. It moves far less with the load than the ratio."""
    spent = sum(e2e[f'{name}_cpu_ms_per_pod'] for name in ('emulator', 'driver', scheduler))
    return round((raw['emulator_cpu_ms_per_pod'] + raw['driver_cpu_ms_per_pod']) / spent, 2) if spent else 0.0


def _emulator_ceiling(raw: dict[str, float], e2e: dict[str, float]) -> float:
    """The emulator's CPU per pod in the raw phase over that in the end-to-end phase: the emulator
    serves on one thread and is busy nearly all the time in the raw phase, so however fast the
    scheduler and however many cores, the end-to-end rate cannot pass this share of the raw one
    while the emulator does that much more per pod (the Event, the watch events)."""
    spent = e2e['emulator_cpu_ms_per_pod']
    return round(raw['emulator_cpu_ms_per_pod'] / spent, 2) if spent else 0.0


def _load(started: float) -> list[float]:
    """The machine's load average at the start and at the end (1 minute): the rates move with it."""
    return [round(started, 1), round(os.getloadavg()[0], 1)]


async def main_async(args: argparse.Namespace) -> None:
    started = os.getloadavg()[0]
    if args.scale:
        result = await at_scale(nodes=args.scale_nodes, running=args.scale_running, pods=args.scale_pods,
                                concurrency=args.concurrency, timeout=args.timeout, profile=args.profile,
                                with_ceiling=args.ceiling)
        print(json.dumps({'concurrency': args.concurrency, **result, 'load_average': _load(started)}), flush=True)
        return
    runs = []
    for _ in range(args.runs):
        started = os.getloadavg()[0]
        raw, raw_cpu = await asyncio.wait_for(
            raw_capacity(pods=args.pods, nodes=args.nodes, concurrency=args.concurrency), args.timeout)
        e2e, rss_after_run, cpu = await end_to_end(pods=args.pods, nodes=args.nodes, concurrency=args.concurrency,
                                                   timeout=args.timeout, profile=args.profile)
        ideal = await ceiling(pods=args.pods, nodes=args.nodes, concurrency=args.concurrency,
                              timeout=args.timeout) if args.ceiling else None
        runs.append({'pods': args.pods, 'nodes': args.nodes, 'concurrency': args.concurrency,
                     'raw_pods_per_second': round(raw, 1), 'e2e_pods_per_second': round(e2e, 1),
                     'ratio': round(e2e / raw, 2), 'cpu_ratio': _cpu_ratio(raw_cpu, cpu),
                     'emulator_ceiling': _emulator_ceiling(raw_cpu, cpu), **cpu,
                     'operator_rss_mb_after_run': rss_after_run,
                     'raw': raw_cpu, **(_ceiling_figures(e2e, raw, raw_cpu, *ideal) if ideal else {}),
                     'load_average': _load(started)})
        print(json.dumps(runs[-1]), flush=True)
    if len(runs) > 1:
        print(json.dumps({'runs': len(runs), 'median': {key: round(statistics.median(run[key] for run in runs), 2)
                                                          for key in MEDIAN_OF if key in runs[0]}}), flush=True)
    if args.rss_pods:
        memory = await rss_with_cache(pods=args.rss_pods, nodes=args.rss_nodes, concurrency=args.concurrency,
                                      timeout=args.timeout)
        print(json.dumps({'cache_pods': args.rss_pods, 'cache_nodes': args.rss_nodes, **memory}), flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or '').splitlines()[0])
    parser.add_argument('--pods', type=int, default=2000)
    parser.add_argument('--nodes', type=int, default=100)
    parser.add_argument('--rss-pods', type=int, default=5000, help='0: skip the memory phase')
    parser.add_argument('--rss-nodes', type=int, default=500)
    parser.add_argument('--concurrency', type=int, default=32, help='requests in flight from the driver')
    parser.add_argument('--scale', action='store_true', help='the at-scale phases instead (see --scale-*)')
    parser.add_argument('--scale-nodes', type=int, default=5000)
    parser.add_argument('--scale-running', type=int, default=50_000)
    parser.add_argument('--scale-pods', type=int, default=5000)
    parser.add_argument('--runs', type=int, default=1,
                        help='raw and end-to-end phases this many times in turn, then the medians')
    parser.add_argument('--ceiling', action='store_true',
                        help='also run benchmarks.ideal_scheduler (a bind and an Event per pod, nothing else) in the '
                             "operator's place: what a scheduler costing next to nothing reaches here")
    parser.add_argument('--profile', metavar='FILE', help='py-spy summary of the operator while it binds')
    parser.add_argument('--timeout', type=float, default=600.0, help='give up a phase after this many seconds')
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    asyncio.run(main_async(parse_args(argv)))


if __name__ == '__main__':
    main()

"""`kopfsched sandbox`: a throwaway cluster to watch the real operator in.

It starts the in-process Kubernetes API emulator (kopfsched.emulator) on 127.0.0.1, creates
the SchedulerProfile CRD and two profiles — `kopfsched` and `default-scheduler`, so pods
without a schedulerName are scheduled too (the sandbox has no other scheduler) — loads the
snapshot's objects through the API as `kubectl create` would, writes a kubeconfig, and runs
the same operator as `kopfsched run` (kopf + kubernetes-asyncio over HTTP) against it,
with its dashboard on the metrics port. Nodes are objects only: no kubelet runs pods, so
bound pods stay in phase Pending, as they would on a cluster whose nodes never start them.

SIGINT or SIGTERM stops the operator (bindings in flight finish), then the emulator.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import pathlib
import signal
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import aiohttp
import yaml

from kopfsched.documents import object_label, problem_line, read_documents
from kopfsched.emulator.resources import BUILTIN_RESOURCES, ResourceDef
from kopfsched.emulator.server import FastKubernetesEmulator, write_kubeconfig
from kopfsched.kube.informer import DEFAULT_SCHEDULER_PROFILE
from kopfsched.kube.operator import EXIT_FAILED, Operator, OperatorOptions, StartupError

logger = logging.getLogger(__name__)

REPO = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_SNAPSHOT = REPO / "examples" / "cluster.yaml"
CRD_FILE = REPO / "crds" / "schedulerprofile.yaml"
DEFAULT_METRICS_PORT: int = next(int(f.default) for f in dataclasses.fields(OperatorOptions)  # type: ignore[arg-type]
                                 if f.name == "metrics_port")
"""`kopfsched run`'s metrics port: the dashboard is where it is in a cluster."""
PROFILES_PATH = "/apis/kopfsched.dev/v1alpha1/schedulerprofiles"

EXTRA_RESOURCES = (  # read by the scheduler (PodTopologySpread's defaulting, Coscheduling), not served by default
    ResourceDef(group="apps", version="v1", plural="replicasets", kind="ReplicaSet", namespaced=True,
                short_names=("rs",)),
    ResourceDef(group="apps", version="v1", plural="statefulsets", kind="StatefulSet", namespaced=True,
                short_names=("sts",)),
    ResourceDef(group="", version="v1", plural="replicationcontrollers", kind="ReplicationController",
                namespaced=True, short_names=("rc",)),
)

MINIMAL_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "schedulerprofiles.kopfsched.dev"},
    "spec": {"group": "kopfsched.dev", "scope": "Cluster",
             "names": {"plural": "schedulerprofiles", "singular": "schedulerprofile", "kind": "SchedulerProfile",
                       "shortNames": ["schedprof"]},
             "versions": [{"name": "v1alpha1", "served": True, "storage": True, "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]},
}
"""Used only when the repository's crds/ is not next to the package (an installed wheel)."""


DEFAULT_KUBECONFIG = "~/.kube/kopfsched-sandbox.kubeconfig"
"""Beside kubectl's own config, not in the directory the sandbox was started from (a checkout)."""


class SandboxError(Exception):
    """Bad input or a port in use: one line for the user."""


@dataclasses.dataclass(slots=True)
class SandboxOptions:
    files: list[str] = dataclasses.field(default_factory=list)
    """Snapshot files (YAML); none: the example cluster."""
    kubeconfig_out: str = "kopfsched-sandbox.kubeconfig"
    """Written once the sandbox serves: a sandbox that fails to start leaves another's file alone."""
    metrics_port: int = DEFAULT_METRICS_PORT
    api_port: int = 0
    """The emulator's port; 0 picks a free one."""
    status_interval: float = 2.0


def load_objects(paths: list[str]) -> list[dict[str, Any]]:
    """Every object of the files (read as every input is: kopfsched.documents); problems
    raise SandboxError with one line each."""
    problems: list[str] = []
    objects: list[dict[str, Any]] = []
    for document in read_documents(paths, problems):
        missing = next((f for f in ("kind", "apiVersion") if not document.obj.get(f)), None)
        if missing:
            problems.append(problem_line(document.where, object_label(document.obj), f"{missing}: required"))
        else:
            objects.append(document.obj)
    if problems:
        raise SandboxInputError(problems)
    return objects


class SandboxInputError(SandboxError):
    """Problems with the snapshot files: one line each, worded as in every other command."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


class _Api:
    """Creates objects through the emulator's HTTP API, as `kubectl create` does."""

    def __init__(self, session: aiohttp.ClientSession, resources: list[ResourceDef]) -> None:
        self.session = session
        self.by_kind = {(r.api_version, r.kind): r for r in resources if r.plural != "bindings"}

    def path_of(self, obj: dict[str, Any]) -> str | None:
        resource = self.by_kind.get((obj["apiVersion"], obj["kind"]))
        if resource is None:
            return None
        prefix = f"/apis/{resource.group}/{resource.version}" if resource.group else "/api/v1"
        if resource.namespaced:
            namespace = (obj.get("metadata") or {}).get("namespace") or "default"
            return f"{prefix}/namespaces/{namespace}/{resource.plural}"
        return f"{prefix}/{resource.plural}"

    async def create(self, obj: dict[str, Any], path: str | None = None) -> str | None:
        """None when created, else the API's message."""
        path = path or self.path_of(obj)
        if path is None:
            return f"the sandbox's API does not serve {obj['apiVersion']} {obj['kind']}"
        async with self.session.post(path, json=obj) as response:
            if response.status < 300:
                return None
            body = await response.json(content_type=None)
            return (body or {}).get("message") or f"HTTP {response.status}"


def _reporting_ready(node: dict[str, Any]) -> dict[str, Any]:
    """A snapshot's node as its kubelet would keep it: Ready, unless the snapshot says otherwise."""
    status = dict(node.get("status") or {})
    conditions = list(status.get("conditions") or ())
    if not any(c.get("type") == "Ready" for c in conditions):
        conditions.append({"type": "Ready", "status": "True", "reason": "KubeletReady",
                           "message": "kubelet is posting ready status (kopfsched sandbox)"})
    return {**node, "status": {**status, "conditions": conditions}}


def _crd() -> dict[str, Any]:
    try:
        return yaml.safe_load(CRD_FILE.read_text(encoding="utf-8"))
    except OSError:
        return MINIMAL_CRD


def _profile(name: str) -> dict[str, Any]:
    profile = yaml.safe_load(yaml.safe_dump(DEFAULT_SCHEDULER_PROFILE))  # a deep copy
    profile["metadata"]["name"] = name
    profile["spec"]["schedulerName"] = name
    return profile


async def preload(emulator: FastKubernetesEmulator, objects: list[dict[str, Any]],
                  warn: Callable[[str], None]) -> dict[str, int]:
    """The CRD, the snapshot's objects, then our two profiles unless the snapshot names them.
    Objects the API refuses are reported through `warn` and skipped. Returns counts by kind."""
    for resource in EXTRA_RESOURCES:
        emulator.register(resource)
    counts: dict[str, int] = {}
    async with aiohttp.ClientSession(emulator.url) as session:
        api = _Api(session, [*BUILTIN_RESOURCES, *EXTRA_RESOURCES])
        problem = await api.create(_crd(), "/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
        if problem is not None:
            raise SandboxError(f"creating the SchedulerProfile CRD: {problem}")
        crd_kind = ("kopfsched.dev/v1alpha1", "SchedulerProfile")
        api.by_kind[crd_kind] = ResourceDef(group="kopfsched.dev", version="v1alpha1", plural="schedulerprofiles",
                                            kind="SchedulerProfile", namespaced=False)
        # Namespaces first: a real API server refuses objects in a namespace that does not exist.
        ordered = sorted(objects, key=lambda o: o["kind"] != "Namespace")
        scheduler_names = set()
        for obj in ordered:
            meta = obj.get("metadata") or {}
            namespace = meta.get("namespace")
            label = f"{obj['kind']} {namespace + '/' if namespace else ''}{meta.get('name')}"
            if obj["kind"] == "SchedulerProfile":
                scheduler_names.add((obj.get("spec") or {}).get("schedulerName") or meta.get("name"))
            if obj["kind"] == "Node":
                obj = _reporting_ready(obj)
            problem = await api.create(obj)
            if problem is not None:
                if "already exists" not in problem or obj["kind"] != "Namespace":
                    warn(f"skipped {label}: {problem}")
                continue
            counts[obj["kind"]] = counts.get(obj["kind"], 0) + 1
        for name in ("kopfsched", "default-scheduler"):
            if name not in scheduler_names:
                problem = await api.create(_profile(name), PROFILES_PATH)
                if problem is not None and "already exists" not in problem:
                    warn(f"could not create SchedulerProfile {name}: {problem}")
    return counts


def usage(*, kubeconfig: str, dashboard: str, api: str, counts: dict[str, int], example: bool) -> str:
    loaded = ", ".join(f"{n} {kind}{'s' if n != 1 else ''}" for kind, n in sorted(counts.items())) or "nothing"
    k = f"kubectl --kubeconfig {kubeconfig}"
    lines = [
        (f"{k} get pods -A -o wide", "where each pod landed"),
        (f"{k} describe pod -n NAMESPACE NAME", "why a pod waits: PodScheduled and Events"),
        (f"{k} get schedulerprofiles", "the profiles, hot-reloaded on edit"),
        (f"{k} apply -f my-pod.yaml", "pods of no schedulerName or `kopfsched`"),
    ]
    if example:
        lines.insert(3, (f"{k} apply -f examples/profiles/bin-packing.yaml", "the report-* pods' scheduler"))
    commands = "\n".join(f"  # {why}\n  {command}" for command, why in lines)
    return f"""
kopfsched sandbox: an emulated Kubernetes API at {api} ({loaded}),
with the kopfsched operator scheduling pods of `schedulerName: kopfsched` and of no schedulerName.
Nodes are objects only: bound pods are not started.
Placements may differ from `kopfsched simulate` on the same file: here the API server stamps
each pod's creationTimestamp as the sandbox creates it (file order, not the file's times) and
score ties are broken at random, as kube-scheduler does; simulate queues by the file's
creationTimestamp and breaks ties with --seed.

  dashboard     {dashboard}
  pending pods  {dashboard}debug/pending
  kubeconfig    {kubeconfig}

{commands}

Ctrl-C stops it.
"""


async def run_sandbox(options: SandboxOptions, stop: asyncio.Event, *,
                      announce: Callable[[str], None] = lambda text: print(text, flush=True),
                      warn: Callable[[str], None] = lambda line: print(f"warning: {line}", file=sys.stderr),
                      started: Callable[[Operator], None] | None = None) -> int:
    """Serve until `stop` is set; the exit status of the operator."""
    files = options.files or [str(DEFAULT_SNAPSHOT)]
    objects = load_objects(files)
    emulator = FastKubernetesEmulator()
    try:
        url = await emulator.start(host="127.0.0.1", port=options.api_port)
    except OSError as exc:
        raise SandboxError(f"cannot serve the API on 127.0.0.1:{options.api_port}: {exc.strerror or exc}") from exc
    private = tempfile.TemporaryDirectory(prefix="kopfsched-sandbox-")
    try:
        counts = await preload(emulator, objects, warn)
        kubeconfig = pathlib.Path(options.kubeconfig_out).resolve()
        # The operator's own copy: the user's file is written only once the sandbox serves.
        operator_kubeconfig = write_kubeconfig(pathlib.Path(private.name) / "kubeconfig", url=url)
        operator_options = OperatorOptions(
            kubeconfig=str(operator_kubeconfig), leader_elect=False, metrics_port=options.metrics_port,
            metrics_host="127.0.0.1", identity="kopfsched-sandbox", status_interval=options.status_interval,
            seed_default_profile=False)
        try:
            async with Operator.connected(operator_options) as operator:
                task = asyncio.ensure_future(operator.run(stop))
                while not operator.ready() and not task.done():
                    await asyncio.wait([task], timeout=0.1)
                if not task.done():
                    write_kubeconfig(kubeconfig, url=url)
                    port = operator.health.port if operator.health is not None else options.metrics_port
                    announce(usage(kubeconfig=_shown(kubeconfig), dashboard=f"http://127.0.0.1:{port}/", api=url,
                                   counts=counts, example=not options.files))
                    if started is not None:
                        started(operator)
                return await task
        except StartupError as exc:
            raise SandboxError(str(exc)) from exc
    finally:
        await emulator.stop()
        private.cleanup()


def _shown(path: pathlib.Path) -> str:
    """The kubeconfig's path as short as the user can type it from here."""
    for base, prefix in ((pathlib.Path.cwd(), ""), (pathlib.Path.home(), "~/")):
        try:
            return prefix + str(path.relative_to(base))
        except ValueError:
            continue
    return str(path)


def main(options: SandboxOptions) -> int:
    """The `kopfsched sandbox` command."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("aiohttp.access", "kopfsched.kube.informer"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # kopf's warnings here are about the sandbox, not the user's pods ("OS signals are ignored"
    # in its thread, the optional PodGroup CRD not installed).
    logging.getLogger("kopf").setLevel(logging.ERROR)

    async def serve() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        return await run_sandbox(options, stop)

    try:
        return asyncio.run(serve())
    except SandboxInputError as exc:
        print("\n".join(exc.lines), file=sys.stderr)
        return EXIT_FAILED
    except SandboxError as exc:
        print(f"kopfsched sandbox: {exc}", file=sys.stderr)
        return EXIT_FAILED

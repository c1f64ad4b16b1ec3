"""`kopfsched plan`: which nodes to add so pending pods fit, and which nodes could go.

Every answer comes from the product's own scheduling cycle over hypothetical nodes, made
from node templates (Node objects, with their ResourceSlices, like cluster-autoscaler's
node groups), so every plugin applies as it would in the cluster. The room, in order:

1. Baseline: `simulate` the snapshot; its Unschedulable pods are the pods to help.
2. Probe: with the baseline settled, one fresh node per template is added and each pod
   to help runs one exhaustive cycle (SchedulingAlgorithm.schedule_pod, as `explain`):
   the templates whose node passes every Filter can help the pod; the filter statuses on
   the others are why they cannot (upstream's reason strings).
3. Fill, per template (cluster-autoscaler's estimator, done by the real queue): nodes of
   one template are added one at a time to a settled scheduler, the queue moves the pods
   the node event may help, and the scheduler places them; a node that takes no pod to
   help ends the fill. The template with the most pods helped per node (per price, when
   prices are given) is committed; the next round fills for the pods still pending.
4. Search: nodes the plan can do without are dropped, then smaller (cheaper) template
   multisets are simulated in order of size (cost), within a budget; the first one that
   places every helped pod wins. The plan is `minimal` when the search was exhaustive or
   the resource lower bound is met.
5. Scale-down, on the cluster with the planned nodes: an existing node can go when
   cluster-autoscaler's drain rules let each of its pods move (DaemonSet and mirror pods
   go with the node) and the scheduler places them all elsewhere — tried for real: the
   pods are deleted and created again pending, the node deleted, the queue drained; a
   failed try is undone. PodDisruptionBudgets' disruptionsAllowed is spent as nodes go.
6. Verify: `simulate` the snapshot with the planned nodes added and the removed nodes
   gone (their pods pending); every helped and every moved pod must be scheduled. A
   removal the full run does not bear out is dropped, last first.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO

from kopfsched.documents import problem_line, read_documents
from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.diagnosis import FitError
from kopfsched.framework.preemption.candidates import DisruptionBudget
from kopfsched.framework.registry import Registry
from kopfsched.framework.resources import CPU, MEMORY, PODS, quantity_value
from kopfsched.framework.types import Obj, PodInfo, parse_time, pod_key
from kopfsched.plugins.registry import full_registry
from kopfsched.scheduler.event_handlers import EventHandlers
from kopfsched.scheduler.schedule_one import SchedulingError
from kopfsched.simulate.compare import MIRROR_ANNOTATION
from kopfsched.simulate.html import ZONE_LABEL, cluster_view
from kopfsched.simulate.loader import ClusterInput, Loaded
from kopfsched.simulate.output import filter_explain, format_quantity, to_json
from kopfsched.simulate.runner import MAX_ATTEMPTS_PER_POD, Simulation, VirtualClock, drain, load_scheduler, simulate
from kopfsched.simulate.workloads import daemon_pod, should_run_daemon_pod

PRICE_ANNOTATION = "kopfsched.dev/price"
"""On a template: the price of one node of it (any unit, e.g. per hour); with prices, the cheapest plan wins."""
MAX_COUNT_ANNOTATION = "kopfsched.dev/max-count"
"""On a template: at most this many nodes of it are added (a node group's max size)."""
TEMPLATE_ANNOTATION = "kopfsched.dev/node-template"
"""Set on each planned node: the template it was made from."""
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
SAFE_TO_EVICT_LOCAL_VOLUMES = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
HOSTNAME_LABEL = "kubernetes.io/hostname"
SEARCH_BUDGET = 120
"""Simulations the search for a smaller (cheaper) plan may run after the greedy fill, on a
cluster of up to 200 nodes; on larger ones, proportionally fewer (at least 4)."""
PROBE_SUFFIX = "probe"


class PlanError(Exception):
    """Bad plan input; str() is the one-line message."""


# -- templates ---------------------------------------------------------------------------


@dataclass
class NodeTemplate:
    name: str
    node: Obj
    slices: list[Obj] = field(default_factory=list)
    """ResourceSlices whose spec.nodeName is the template: copied onto each node made from it."""
    price: float | None = None
    max_count: int | None = None

    @property
    def allocatable(self) -> dict[str, int]:
        alloc = (self.node.get("status") or {}).get("allocatable") or (self.node.get("status") or {}).get("capacity") \
            or {}
        return {name: quantity_value(name, str(value)) for name, value in alloc.items()}

    def make(self, node_name: str) -> tuple[Obj, list[Obj]]:
        """A node of this template named `node_name` (hostname label too), with its ResourceSlices."""
        node = copy.deepcopy(self.node)
        meta = node.setdefault("metadata", {})
        meta["name"] = node_name
        meta.pop("uid", None)
        meta.setdefault("labels", {})[HOSTNAME_LABEL] = node_name
        meta.setdefault("annotations", {})[TEMPLATE_ANNOTATION] = self.name
        slices = []
        for original in self.slices:
            piece = copy.deepcopy(original)
            piece["metadata"]["name"] = f"{node_name}-{original['metadata']['name']}"
            piece["spec"]["nodeName"] = node_name
            pool = piece["spec"].get("pool")
            if isinstance(pool, dict) and pool.get("name") == self.name:
                pool["name"] = node_name
            slices.append(piece)
        return node, slices


def load_templates(paths: Sequence[str]) -> tuple[list[NodeTemplate], list[str]]:
    """The Node templates of `paths` and their ResourceSlices; every problem as one line."""
    problems: list[str] = []
    templates: dict[str, NodeTemplate] = {}
    slices: list[tuple[Obj, str]] = []
    for document in read_documents(paths, problems):
        obj, where = document.obj, document.where
        kind = obj.get("kind")
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        name = meta.get("name")
        label = f"{kind if isinstance(kind, str) and kind else '?'}/{name if isinstance(name, str) and name else '?'}"
        if kind == "ResourceSlice":
            node_name = (obj.get("spec") or {}).get("nodeName")
            if not isinstance(name, str) or not name or not isinstance(node_name, str):
                problems.append(problem_line(where, label, "a template's ResourceSlice needs metadata.name and "
                                                            "spec.nodeName (the template's name)"))
            else:
                slices.append((obj, where))
            continue
        if kind != "Node":
            problems.append(problem_line(where, label, "kind: a node template must be a Node"))
            continue
        if not isinstance(name, str) or not name:
            problems.append(problem_line(where, label, "metadata.name: required"))
            continue
        if name in templates:
            problems.append(problem_line(where, label, "metadata.name: a second template of this name"))
            continue
        annotations = meta.get("annotations") or {}
        template = NodeTemplate(name, obj)
        price = annotations.get(PRICE_ANNOTATION)
        if price is not None:
            try:
                template.price = float(price)
                if not math.isfinite(template.price) or template.price < 0:
                    raise ValueError
            except (TypeError, ValueError):
                problems.append(problem_line(where, label, f"metadata.annotations[{PRICE_ANNOTATION}]: "
                                                            f"must be a number of at least 0, got {price!r}"))
                continue
        count = annotations.get(MAX_COUNT_ANNOTATION)
        if count is not None:
            if not (isinstance(count, str) and count.isdigit()):
                problems.append(problem_line(where, label, f"metadata.annotations[{MAX_COUNT_ANNOTATION}]: "
                                                            f"must be a whole number, got {count!r}"))
                continue
            template.max_count = int(count)
        templates[name] = template
    for obj, where in slices:
        owner = templates.get(obj["spec"]["nodeName"])
        if owner is None:
            problems.append(problem_line(where, f"ResourceSlice/{obj['metadata']['name']}",
                                         f"spec.nodeName: no node template named {obj['spec']['nodeName']!r}"))
        else:
            owner.slices.append(obj)
    found = list(templates.values())
    priced = [t for t in found if t.price is not None]
    if priced and len(priced) != len(found):
        problems.append(f"{', '.join(paths)}: give {PRICE_ANNOTATION} on every template or on none "
                        f"(missing on {', '.join(t.name for t in found if t.price is None)})")
    if not found and not problems:
        problems.append(f"{', '.join(paths)}: no node templates: a template is a Node object")
    return found, problems


# -- the plan ------------------------------------------------------------------------------


@dataclass
class Plan:
    report: dict[str, Any]
    """What -o json prints (docs/plan.md)."""
    before_view: dict[str, Any]
    after_view: dict[str, Any]
    """What the HTML page draws of the cluster before and after."""
    apply_objects: list[Obj]
    """The snapshot with the planned nodes added and the removed nodes gone (--apply-to)."""


def _daemon_or_mirror(pod: Obj) -> bool:
    meta = pod.get("metadata") or {}
    if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
        return True
    return any(ref.get("kind") == "DaemonSet" and ref.get("controller", True)
               for ref in meta.get("ownerReferences") or ())


def _terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _pending_again(pod: Obj) -> Obj:
    """The pod as its controller would create it again: unbound, no nomination, no PodScheduled."""
    new = copy.deepcopy(pod)
    new["spec"].pop("nodeName", None)
    status = new.get("status")
    if isinstance(status, dict):
        status.pop("nominatedNodeName", None)
        status["conditions"] = [c for c in status.get("conditions") or () if c.get("type") != "PodScheduled"]
    return new


def _rfc3339(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def blocking_reason(pod: Obj, pdb_namespaces: set[str]) -> tuple[str, str] | None:
    """cluster-autoscaler's drain rules, in its order: (BlockingPodReason, its message) when
    the pod cannot move. DaemonSet, mirror and terminal pods are not asked (they go with the node)."""
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    name = meta.get("name", "")
    safe_to_evict = str(annotations.get(SAFE_TO_EVICT, "")).lower()
    if safe_to_evict == "true":
        return None  # overrides every rule below, as in cluster-autoscaler
    if not any(ref.get("controller") for ref in meta.get("ownerReferences") or ()):
        return "NotReplicated", f"{meta.get('namespace', 'default')}/{name} is not replicated"
    if meta.get("namespace") == "kube-system" and "kube-system" not in pdb_namespaces:
        return ("UnmovableKubeSystemPod",
                f"non-daemonset, non-mirrored, non-pdb-assigned kube-system pod present: {name}")
    allowed = {v.strip() for v in str(annotations.get(SAFE_TO_EVICT_LOCAL_VOLUMES, "")).split(",") if v.strip()}
    for volume in (pod.get("spec") or {}).get("volumes") or ():
        local = "hostPath" in volume or ("emptyDir" in volume and (volume["emptyDir"] or {}).get("medium") != "Memory")
        if local and volume.get("name") not in allowed:
            return "LocalStorageRequested", f"pod with local storage present: {name}"
    if safe_to_evict == "false":
        return "NotSafeToEvictAnnotation", f"pod annotated as not safe to evict present: {name}"
    return None


def _utilization(info: Any) -> float:
    """cluster-autoscaler's node utilization: the larger of CPU and memory requested / allocatable
    (DaemonSet and mirror pods counted, as its default)."""
    shares = [info.requested.get(r) / info.allocatable.get(r) for r in (CPU, MEMORY) if info.allocatable.get(r)]
    return max(shares, default=0.0)


class Planner:
    def __init__(self, inputs: ClusterInput, templates: list[NodeTemplate], *, registry: Registry | None = None,
                 seed: int | None = 0, search_budget: int | None = None) -> None:
        self.pristine = inputs.copy()
        self.settled = inputs
        """The snapshot once the pods that fit now are bound (set by plan())."""
        self.templates = templates
        self.by_name = {t.name: t for t in templates}
        self.registry = registry or full_registry()
        self.seed = seed
        if search_budget is None:
            search_budget = max(4, SEARCH_BUDGET * 200 // max(200, len(inputs.nodes)))
        self.search_budget = search_budget
        self.simulations = 0
        taken = {loaded.obj["metadata"]["name"] for loaded in inputs.nodes}
        self._names: dict[str, list[str]] = {}
        self._taken = taken

    # -- node names and inputs -------------------------------------------------------------

    def node_name(self, template: str, index: int) -> str:
        """The index-th (0-based) node of a template: `<template>-<n>`, skipping names the snapshot has."""
        names = self._names.setdefault(template, [])
        n = len(names)
        while len(names) <= index:
            n += 1
            candidate = f"{template}-{n}"
            if candidate not in self._taken:
                names.append(candidate)
        return names[index]

    def nodes_for(self, multiset: Sequence[str]) -> list[tuple[str, str]]:
        """(node name, template) for a list of template names, numbered per template in order."""
        seen: dict[str, int] = {}
        out = []
        for template in multiset:
            index = seen.get(template, 0)
            seen[template] = index + 1
            out.append((self.node_name(template, index), template))
        return out

    def inputs_with(self, added: Sequence[tuple[str, str]], removed: Iterable[str] = ()) -> ClusterInput:
        """The snapshot plus the nodes `added` ((name, template)), minus the nodes `removed`:
        their DaemonSet and mirror pods dropped, every other pod pending again."""
        inputs = self.settled.copy()
        gone = set(removed)
        for name, template in added:
            node, slices = self.by_name[template].make(name)
            inputs.nodes.append(Loaded(node, "plan"))
            inputs.objects.extend(Loaded(s, "plan") for s in slices)
            inputs.pods.extend(Loaded(pod, "plan") for pod in self._daemon_pods(node))
        if gone:
            inputs.nodes = [n for n in inputs.nodes if n.obj["metadata"]["name"] not in gone]
            inputs.objects = [o for o in inputs.objects if not (
                o.obj.get("kind") == "ResourceSlice" and (o.obj.get("spec") or {}).get("nodeName") in gone)]
            # The drained pods are created again after the new nodes took the pending pods (scale-up
            # first, then scale-down, as the plan ran them): queued after every pending pod.
            later = max((parse_time((p.obj.get("metadata") or {}).get("creationTimestamp")) or 0.0
                         for p in inputs.pods), default=0.0)
            pods = []
            for loaded in inputs.pods:
                if (loaded.obj.get("spec") or {}).get("nodeName") in gone:
                    if _daemon_or_mirror(loaded.obj) or _terminal(loaded.obj):
                        continue
                    again = _pending_again(loaded.obj)
                    later += 1
                    again["metadata"]["creationTimestamp"] = _rfc3339(later)
                    loaded = Loaded(again, loaded.source, loaded.where)
                pods.append(loaded)
            inputs.pods = pods
        return inputs

    async def _simulate(self, inputs: ClusterInput) -> Simulation:
        self.simulations += 1
        return await simulate(inputs, registry=self.registry, seed=self.seed)

    async def _settled(self, added: Sequence[tuple[str, str]]) -> tuple[Simulation, VirtualClock, EventHandlers]:
        """A scheduler holding the snapshot plus `added`, its pending pods scheduled."""
        sim, clock, pending = load_scheduler(self.inputs_with(added), registry=self.registry, seed=self.seed)
        await drain(sim.scheduler, clock, budget=MAX_ATTEMPTS_PER_POD * max(pending, 1))
        return sim, clock, EventHandlers(sim.scheduler)

    def _add_node(self, sim: Simulation, handlers: EventHandlers, name: str, template: str) -> None:
        """A new node joins a running scheduler: its ResourceSlices, the Node, then the pods
        the snapshot's DaemonSets make for it (as their controller would)."""
        node, slices = self.by_name[template].make(name)
        for piece in slices:
            sim.client.add_object(piece)
            handlers.on_object_upsert("ResourceSlice", piece)
        handlers.on_node_upsert(node)
        for pod in self._daemon_pods(node):
            sim.client.add_pod(pod)
            handlers.on_pod_upsert(pod)

    def _daemon_pods(self, node: Obj) -> list[Obj]:
        """The pods the snapshot's DaemonSets run on a new node, bound to it: they start with
        the node, before any pending pod can take its room (cluster-autoscaler's template
        nodes carry them the same way)."""
        pods = []
        name = node["metadata"]["name"]
        for loaded in self.settled.workloads:
            ds = loaded.obj
            if ds.get("kind") == "DaemonSet" and should_run_daemon_pod(ds, node):
                pod = daemon_pod(ds, name, f"{ds['metadata']['name']}-{name}")
                pod["metadata"]["uid"] = f"plan-{pod['metadata']['namespace']}-{pod['metadata']['name']}"
                pod["spec"]["nodeName"] = name
                pods.append(pod)
        return pods

    # -- 2. probe ------------------------------------------------------------------------

    async def probe(self, keys: Sequence[str]) -> tuple[dict[str, set[str]], dict[str, dict[str, Any]]]:
        """(pod key -> templates that can help it, pod key -> {template: filter status on its node})."""
        sim, _, handlers = await self._settled([])
        probes = {}
        for template in self.templates:
            name = f"{template.name}-{PROBE_SUFFIX}"
            while name in self._taken:
                name += "-"
            probes[name] = template.name
            self._add_node(sim, handlers, name, template.name)
        scheduler = sim.scheduler
        node_names = [n.name for n in scheduler.snapshot.node_infos()]
        helps: dict[str, set[str]] = {}
        why: dict[str, dict[str, Any]] = {}
        for key in keys:
            pod = PodInfo(sim.client.pods[key])
            fwk = scheduler.profiles.framework_for(pod)
            if fwk is None:
                continue
            try:
                result = await scheduler.algorithm.schedule_pod(fwk, CycleState(), pod, exhaustive=True)
                statuses = filter_explain(result.diagnosis, node_names)
            except FitError as fit:
                statuses = filter_explain(fit.diagnosis, node_names)
            except SchedulingError as err:
                statuses = {n: {"plugin": "", "code": "Error", "reasons": [err.status.message]} for n in probes}
            helps[key] = {t for n, t in probes.items() if n not in statuses}
            why[key] = {t: statuses[n] for n, t in probes.items() if n in statuses}
        return helps, why

    # -- 3. fill -------------------------------------------------------------------------

    async def fill(self, template: NodeTemplate, base: list[str], targets: set[str]) -> tuple[int, set[str]]:
        """How many nodes of `template`, added to the cluster with `base`, place pods of
        `targets`, and which. Nodes join a batch at a time, as many as the pods still to place
        need at least (their requests over the template's allocatable), so a large fill costs
        a few queue drains, not one per node; nodes a batch leaves empty are deleted again and
        end the fill."""
        used = base.count(template.name)
        limit = len(targets) if template.max_count is None else min(len(targets), template.max_count - used)
        if limit <= 0:
            return 0, set()
        self.simulations += 1
        sim, clock, handlers = await self._settled(self.nodes_for(base))
        cache = sim.scheduler.cache
        helped: set[str] = set()
        count = 0
        while count < limit and helped != targets:
            step = min(limit - count, max(1, self._nodes_needed(targets - helped, template)))
            names = [self.node_name(template.name, used + count + i) for i in range(step)]
            for name in names:
                self._add_node(sim, handlers, name, template.name)
            await drain(sim.scheduler, clock, budget=self._budget(sim))
            helped |= {k for k in targets - helped if (sim.client.pods[k].get("spec") or {}).get("nodeName")}
            empty = [n for n in names if not (info := cache.get_node(n)) or not info.pods]
            count += step - len(empty)
            if empty:
                for name in empty:
                    node = cache.get_node(name)
                    if node is not None and node.node is not None:
                        handlers.on_node_delete(node.node)
                break
        return count, helped

    def _nodes_needed(self, keys: set[str], template: NodeTemplate) -> int:
        """A lower bound on the nodes of `template` the pods `keys` need: their requests over its allocatable."""
        alloc = template.allocatable
        return max((math.ceil(value / alloc[name]) for name, value in self._requests(keys).items()
                    if alloc.get(name)), default=1)

    @staticmethod
    def _budget(sim: Simulation) -> int:
        """Attempts a drain may take: a node event can move every pending pod back to activeQ."""
        return MAX_ATTEMPTS_PER_POD * max(len(sim.client.pods), 1)

    def cost(self, multiset: Sequence[str]) -> float:
        return sum(self.by_name[t].price or 0.0 for t in multiset) if self.priced else float(len(multiset))

    @property
    def priced(self) -> bool:
        return bool(self.templates) and all(t.price is not None for t in self.templates)

    async def greedy(self, helps: dict[str, set[str]]) -> list[str]:
        chosen: list[str] = []
        remaining = {k for k, ts in helps.items() if ts}
        while remaining:
            options = []
            for template in self.templates:
                targets = {k for k in remaining if template.name in helps[k]}
                if not targets:
                    continue
                count, helped = await self.fill(template, chosen, targets)
                if count:
                    unit = template.price if self.priced else 1.0
                    ratio = len(helped) / (count * unit) if unit else math.inf
                    options.append((ratio, len(helped), -count, template.name, count, helped))
            if not options:
                break
            order = {t.name: -i for i, t in enumerate(self.templates)}  # ties: the template given first
            best = max(options, key=lambda o: (o[0], o[1], o[2], order[o[3]]))
            chosen.extend([best[3]] * best[4])
            remaining -= best[5]
        return chosen

    # -- 4. search -----------------------------------------------------------------------

    async def placed(self, multiset: Sequence[str], removed: Iterable[str] = ()) -> tuple[set[str], Simulation]:
        sim = await self._simulate(self.inputs_with(self.nodes_for(multiset), removed))
        return {k for k, p in sim.client.pods.items() if (p.get("spec") or {}).get("nodeName")}, sim

    def _requests(self, keys: Iterable[str]) -> dict[str, int]:
        total: dict[str, int] = {}
        by_key = {pod_key(p.obj): p.obj for p in self.settled.pods}
        for key in keys:
            pod = by_key.get(key)
            if pod is None:
                continue  # not in the settled snapshot: left out, the bound stays a lower bound
            for name, value in PodInfo(pod).requests.as_dict().items():
                total[name] = total.get(name, 0) + value
            total[PODS] = total.get(PODS, 0) + 1
        return total

    def _fits_resources(self, multiset: Sequence[str], need: dict[str, int]) -> bool:
        have: dict[str, int] = {}
        for t in multiset:
            for name, value in self.by_name[t].allocatable.items():
                have[name] = have.get(name, 0) + value
        # Helped pods fit no existing node and the nodes added free nothing there: they all go on new nodes.
        return all(have.get(name, 0) >= value for name, value in need.items())

    async def search(self, best: list[str], helped: set[str], helps: dict[str, set[str]]) -> tuple[list[str], bool]:
        """A smaller (cheaper) multiset that places every pod of `helped`, tried in order of
        size (cost) within the budget; (the best found, whether it is proven minimal)."""
        need = self._requests(helped)
        covers = [helps[k] for k in helped if helps.get(k)]
        names = [t.name for t in self.templates]
        best_cost = self.cost(best)
        limits = []
        for t in self.templates:
            bound = len(best) if not self.priced or not t.price else int(best_cost // t.price)
            bound = min(bound, len(helped))
            limits.append(bound if t.max_count is None else min(bound, t.max_count))
        candidates = []
        for counts in itertools.product(*(range(b + 1) for b in limits)):
            multiset = [n for n, c in zip(names, counts, strict=True) for _ in range(c)]
            cost = self.cost(multiset)
            if cost >= best_cost and not (cost == best_cost and len(multiset) < len(best)):
                continue
            if not multiset or not self._fits_resources(multiset, need):
                continue
            present = set(multiset)
            if any(not (cover & present) for cover in covers):
                continue
            candidates.append((cost, len(multiset), multiset))
        candidates.sort(key=lambda c: (c[0], c[1], c[2]))
        if len(candidates) > self.search_budget:
            return best, False  # a partial search proves nothing: spare its simulations
        for _, _, multiset in candidates:
            scheduled, _ = await self.placed(multiset)
            if helped <= scheduled:
                return multiset, True
        return best, True

    async def prune(self, chosen: list[str], helped: set[str]) -> list[str]:
        """Drop nodes the plan does without: the last node of each template in turn, again
        while one can go (within the search budget)."""
        tried = 0
        dropped = True
        while dropped and tried < self.search_budget:
            dropped = False
            for name in sorted(set(chosen), key=lambda t: -self.cost([t])):  # the dearest first
                if tried >= self.search_budget or len(chosen) <= 1:
                    break
                index = len(chosen) - 1 - chosen[::-1].index(name)
                trial = chosen[:index] + chosen[index + 1:]
                tried += 1
                scheduled, _ = await self.placed(trial)
                if helped <= scheduled:
                    chosen, dropped = trial, True
        return chosen

    # -- 5. scale-down -------------------------------------------------------------------

    async def scale_down(self, added: list[tuple[str, str]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        sim, clock, handlers = await self._settled(added)
        cache = sim.scheduler.cache
        pdb_objs = cache.objects.list("PodDisruptionBudget")
        pdbs = [DisruptionBudget.from_obj(o) for o in pdb_objs]
        allowed = [p.disruptions_allowed for p in pdbs]
        pdb_names = [f"{(o.get('metadata') or {}).get('namespace', 'default')}/{o['metadata']['name']}"
                     for o in pdb_objs]
        pdb_namespaces = {p.namespace for p in pdbs}
        new_nodes = {name for name, _ in added}
        existing = []
        for name in cache.node_names():
            info = cache.get_node(name)
            if info is None or name in new_nodes:
                continue
            busy = any(not _daemon_or_mirror(p.pod) and not _terminal(p.pod) for p in info.pods.values())
            existing.append((busy, _utilization(info), name))
        removable: list[dict[str, Any]] = []
        kept: list[dict[str, Any]] = []
        for _, _, name in sorted(existing):
            info = cache.get_node(name)
            assert info is not None and info.node is not None  # get_node() gives nodes with their Node
            node_obj = info.node
            annotations = (node_obj.get("metadata") or {}).get("annotations") or {}
            if str(annotations.get(SCALE_DOWN_DISABLED, "")).lower() == "true":
                kept.append({"node": name, "reason": "ScaleDownDisabledAnnotation",
                             "message": f"node is annotated {SCALE_DOWN_DISABLED}=true", "pods": []})
                continue
            pods = [p.pod for p in info.pods.values()]
            movable = [p for p in pods if not _daemon_or_mirror(p) and not _terminal(p)]
            blocked = []
            for pod in movable:
                why = blocking_reason(pod, pdb_namespaces)
                if why is not None:
                    blocked.append({"pod": pod_key(pod), "reason": why[0], "message": why[1]})
            spend = [0] * len(pdbs)
            for pod in movable:
                labels = (pod.get("metadata") or {}).get("labels") or {}
                for i, pdb in enumerate(pdbs):
                    if pdb.matches is not None and pdb.namespace == pod["metadata"].get("namespace") \
                            and pdb.matches(labels) and pod["metadata"].get("name") not in pdb.disrupted_pods:
                        spend[i] += 1
                        if spend[i] > allowed[i]:
                            blocked.append({"pod": pod_key(pod), "reason": "NotEnoughPdb",
                                            "message": f"not enough pod disruption budget to move {pod_key(pod)} "
                                                       f"(PodDisruptionBudget {pdb_names[i]} allows "
                                                       f"{allowed[i]} more)"})
            if blocked:
                kept.append({"node": name, "reason": "BlockedByPod",
                             "message": f"{blocked[0]['reason']}: {blocked[0]['message']}", "pods": blocked})
                continue
            moved = await self._try_removal(sim, clock, handlers, node_obj, pods, movable)
            if isinstance(moved, list):
                kept.append({"node": name, "reason": "NoPlaceToMovePods",
                             "message": f"no place to move {moved[0]['pod']}: {moved[0]['message']}",
                             "pods": moved})
                continue
            allowed = [a - s for a, s in zip(allowed, spend, strict=True)]
            removable.append({"node": name, "pods": [{"pod": k, "node": n} for k, n in moved.items()]})
        return removable, kept

    async def _try_removal(self, sim: Simulation, clock: VirtualClock, handlers: EventHandlers, node_obj: Obj,
                           pods: list[Obj], movable: list[Obj]) -> dict[str, str] | list[dict[str, Any]]:
        """Delete the node and its pods, create the movable pods again pending and let the
        scheduler place them: {pod: node} when every one is placed; else the failures, undone."""
        client = sim.client
        for pod in pods:
            client.pods.pop(pod_key(pod), None)
            handlers.on_pod_delete(pod)
        handlers.on_node_delete(node_obj)
        for pod in movable:
            again = _pending_again(pod)
            client.add_pod(again)
            handlers.on_pod_upsert(again, timestamp=clock.now)
        await drain(sim.scheduler, clock, budget=self._budget(sim))
        keys = [pod_key(p) for p in movable]
        placed: dict[str, str] = {k: (client.pods[k].get("spec") or {}).get("nodeName") or ""
                                  for k in keys if k in client.pods}
        if all(placed.get(k) for k in keys):
            return {k: placed[k] for k in keys}
        failures = []
        for key in keys:
            if not placed.get(key):
                attempt = sim.log.attempts.get(key)
                failures.append({"pod": key, "reason": "NoPlaceToMovePods",
                                 "message": (attempt.message if attempt is not None else "") or "not scheduled"})
        for key in keys:  # undo: the pods back on the node as they were
            current = client.pods.pop(key, None)
            if current is not None:
                handlers.on_pod_delete(current)
        handlers.on_node_upsert(node_obj)
        for pod in pods:
            client.add_pod(pod)
            handlers.on_pod_upsert(pod)
        await drain(sim.scheduler, clock, budget=self._budget(sim))
        return failures

    # -- the whole plan ------------------------------------------------------------------

    async def plan(self) -> Plan:
        began = time.perf_counter()
        base = self.pristine.copy()
        baseline = await self._simulate(base)
        self.settled = settled_input(base, baseline, self.pristine.workloads)
        before = to_json(baseline, explain=False)
        to_help = [f"{p['namespace']}/{p['name']}" for p in before["pods"] if p["result"] == "Unschedulable"]
        messages = {f"{p['namespace']}/{p['name']}": p["message"] for p in before["pods"]}
        helps, why = await self.probe(to_help)
        chosen = await self.greedy(helps)
        helped: set[str] = set()
        proven = not chosen
        if chosen:
            scheduled, _ = await self.placed(chosen)
            helped = scheduled & set(to_help)
            chosen = await self.prune(chosen, helped)
            chosen, proven = await self.search(chosen, helped, helps)
            proven = proven or self._at_lower_bound(chosen, helped)
        order = {t.name: i for i, t in enumerate(self.templates)}
        chosen.sort(key=lambda name: order[name])
        added = self.nodes_for(chosen)
        removable, kept = await self.scale_down(added)
        # 6. verify with a full run; a removal the run does not bear out goes, last first.
        while True:
            removed = [r["node"] for r in removable]
            scheduled, final = await self.placed(chosen, removed)
            moved = {p["pod"] for r in removable for p in r["pods"]}
            verified = helped <= scheduled and moved <= scheduled
            if verified or not removable:
                break
            dropped = removable.pop()
            kept.append({"node": dropped["node"], "reason": "NoPlaceToMovePods",
                         "message": "its pods do not all fit once every planned change is simulated together",
                         "pods": []})
        after = to_json(final, explain=False)
        report = self._report(before, after, chosen, added, final, helped, to_help, helps, why, messages,
                              removable, kept, proven, verified)
        report["summary"]["seconds"] = round(time.perf_counter() - began, 3)
        apply_inputs = self.inputs_with(added, [r["node"] for r in removable])
        objects = [loaded.obj for group in (apply_inputs.nodes, apply_inputs.objects, apply_inputs.pods,
                                            apply_inputs.workloads, apply_inputs.configs) for loaded in group]
        return Plan(report, cluster_view(baseline, before["pods"]), cluster_view(final, after["pods"]), objects)

    def _at_lower_bound(self, chosen: list[str], helped: set[str]) -> bool:
        """True when no multiset with fewer nodes has the capacity for the helped pods' requests
        (only for plans by node count, with a single template or equal shapes)."""
        if self.priced or not chosen:
            return False
        need = self._requests(helped)
        bound = 0
        for name, value in need.items():
            most = max((t.allocatable.get(name, 0) for t in self.templates), default=0)
            if most:
                bound = max(bound, math.ceil(value / most))
        return bound >= len(chosen)

    def _report(self, before: dict[str, Any], after: dict[str, Any], chosen: list[str],
                added: list[tuple[str, str]], final: Simulation, helped: set[str], to_help: list[str],
                helps: dict[str, set[str]], why: dict[str, dict[str, Any]], messages: dict[str, str],
                removable: list[dict[str, Any]], kept: list[dict[str, Any]], proven: bool,
                verified: bool) -> dict[str, Any]:
        cache = final.scheduler.cache
        groups = []
        for template in self.templates:
            nodes = [n for n, t in added if t == template.name]
            if nodes:
                groups.append({"template": template.name, "count": len(nodes),
                               "price": template.price * len(nodes) if template.price is not None else None,
                               "nodes": nodes})
        added_nodes = []
        for name, template_name in added:
            info = cache.get_node(name)
            added_nodes.append({"name": name, "template": template_name,
                                "pods": sorted(p.key for p in info.pods.values()) if info is not None else []})
        after_pods = {f"{p['namespace']}/{p['name']}": p for p in after["pods"]}
        helped_rows = []
        unhelped = []
        for key in to_help:
            namespace, name = key.split("/", 1)
            if key in helped:
                helped_rows.append({"namespace": namespace, "name": name, "node": after_pods[key]["node"]})
                continue
            statuses = {t: why.get(key, {}).get(t) for t in sorted(helps.get(key, set()) | set(why.get(key, {})))}
            reason = ("no template can help" if not helps.get(key) else
                      "a template can help, but the plan's run did not place it: "
                      + (after_pods.get(key, {}).get("message") or ""))
            unhelped.append({"namespace": namespace, "name": name, "message": messages.get(key, ""),
                             "reason": reason,
                             "templates": {t: v for t, v in statuses.items() if v is not None}})
        priced = self.priced
        return {
            "templates": [{"name": t.name, "price": t.price, "maxCount": t.max_count,
                           "zone": ((t.node.get("metadata") or {}).get("labels") or {}).get(ZONE_LABEL),
                           "allocatable": {k: format_quantity(k, v) for k, v in sorted(t.allocatable.items())},
                           "resourceSlices": len(t.slices)} for t in self.templates],
            "add": groups,
            "addedNodes": added_nodes,
            "helped": helped_rows,
            "unhelped": unhelped,
            "remove": removable,
            "keep": sorted(kept, key=lambda k: k["node"]),
            "summary": {
                "pending": len(to_help), "helped": len(helped), "unhelped": len(unhelped),
                "nodesAdded": len(chosen), "cost": round(self.cost(chosen), 6) if priced else None,
                "objective": "price" if priced else "nodes", "minimal": proven,
                "nodesRemovable": len(removable), "verified": verified, "simulations": self.simulations,
                "seconds": 0.0,
            },
            "before": {"nodes": before["nodes"], "summary": before["summary"]},
            "after": {"nodes": after["nodes"], "summary": after["summary"]},
        }


def settled_input(inputs: ClusterInput, sim: Simulation, daemon_sets: list[Loaded]) -> ClusterInput:
    """The snapshot as it stands once the scheduler has placed what fits now (before any new
    node can join): `inputs` after its simulation, every pod and object as the run left it
    (bound pods, claims allocated, volumes bound; preemption victims gone; workloads expanded)."""
    return ClusterInput(nodes=list(inputs.nodes),
                        pods=[Loaded(pod, "snapshot") for pod in sim.client.pods.values()],
                        objects=[Loaded(obj, "snapshot") for obj in sim.client.objects.values()],
                        configs=list(inputs.configs),
                        # kept: the DaemonSets make pods for every node the plan adds
                        workloads=[w for w in daemon_sets if w.obj.get("kind") == "DaemonSet"])


async def plan(inputs: ClusterInput, templates: list[NodeTemplate], *, registry: Registry | None = None,
               seed: int | None = 0, search_budget: int | None = None) -> Plan:
    return await Planner(inputs, templates, registry=registry, seed=seed, search_budget=search_budget).plan()


def write_objects(objects: Iterable[Obj], out: TextIO) -> int:
    """One JSON document per object (JSON is YAML), as `kopfsched snapshot` writes."""
    count = 0
    out.write("# kopfsched plan --apply-to: the snapshot with the planned nodes added and the removed nodes gone\n")
    for obj in objects:
        out.write(f"---\n{json.dumps(obj, ensure_ascii=False, separators=(',', ':'))}\n")
        count += 1
    return count



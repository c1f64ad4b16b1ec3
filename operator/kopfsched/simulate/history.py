"""The workload `kopfsched replay` runs: pods with an arrival and, optionally, an end.

Two sources, mixed freely (docs/replay.md):

- YAML snapshots, as simulate reads them: a pending pod arrives at its
  `metadata.creationTimestamp`; the annotation `kopfsched.dev/duration` (seconds, or a Go
  duration such as "90s" or "1h30m") says how long it runs once bound, and
  `kopfsched.dev/departure` (RFC 3339) when it is deleted, bound or not. Pods bound in the
  snapshot run from the start; their duration counts from there.
- CSV traces (`*.csv`), one pod a row, with a header naming the columns: `name` and
  `arrival` required; `departure`, `duration`, `namespace`, `schedulerName`, `priority`,
  `nodeSelector` (`key=value;...`) and `tolerations` (`key=value:Effect;key:Effect`)
  optional; `cpu`, `memory`, `ephemeral-storage`, `gpu` (nvidia.com/gpu) and any column
  whose name holds a "/" (an extended resource) are requests. The column names of Alibaba's
  cluster-trace-gpu-v2023 are read too: `creation_time`, `deletion_time`, `cpu_milli`,
  `memory_mib`, `num_gpu`. Other columns are ignored, with one warning.

Times are seconds, or RFC 3339. When any time is absolute, the earliest absolute arrival is
the origin and every time is counted in seconds from it (plain numbers too); otherwise plain
numbers are seconds as given. Bad input never raises: each problem is one line.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kopfsched.documents import Document
from kopfsched.framework.duration import parse_duration
from kopfsched.framework.quantity import QuantityError
from kopfsched.framework.resources import CPU, EPHEMERAL_STORAGE, MEMORY, quantity_value
from kopfsched.framework.types import Obj, parse_time, pod_key
from kopfsched.simulate.loader import (
    ClusterInput,
    Loaded,
    add_document,
    apply_priority_classes,
    generate_resource_claims,
)
from kopfsched.simulate.workloads import expand_workloads

DURATION_ANNOTATION = "kopfsched.dev/duration"
DEPARTURE_ANNOTATION = "kopfsched.dev/departure"
GPU = "nvidia.com/gpu"

_ALIASES = {"creation_time": "arrival", "deletion_time": "departure", "gpu": GPU, "num_gpu": GPU}
_SCALED = {"cpu_milli": (CPU, "m"), "memory_mib": (MEMORY, "Mi")}
"""Alibaba's columns in units of their own: the resource and the suffix that makes a quantity."""
_FIELDS = ("name", "arrival", "departure", "duration", "namespace", "schedulerName", "priority", "nodeSelector",
           "tolerations")
_PLAIN_RESOURCES = (CPU, MEMORY, EPHEMERAL_STORAGE)


@dataclass(slots=True)
class Entry:
    """One pod of the history. Times are seconds from the origin."""

    loaded: Loaded
    arrival: float | None
    """None: there when the replay begins (bound in the snapshot, or no creationTimestamp)."""
    duration: float | None = None
    """Seconds it runs once bound; None: until its departure, or for ever."""
    departure: float | None = None
    """When it is deleted, whatever its state; None: never (but for its duration)."""
    _absolute: tuple[bool, bool] = (False, False)
    """Whether arrival and departure were absolute times (epoch seconds until `History.close`)."""

    @property
    def key(self) -> str:
        return pod_key(self.loaded.obj)

    @property
    def bound(self) -> bool:
        return bool((self.loaded.obj.get("spec") or {}).get("nodeName"))


@dataclass
class History:
    inputs: ClusterInput = field(default_factory=ClusterInput)
    """Nodes, objects, profiles, and every pod (CSV rows made into Pods)."""
    entries: list[Entry] = field(default_factory=list)
    origin: float | None = None
    """The epoch seconds of time 0, when the input held absolute times."""
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def origin_text(self) -> str | None:
        if self.origin is None:
            return None
        return datetime.fromtimestamp(self.origin, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def read_time(text: str) -> tuple[float, bool] | None:
    """(seconds, absolute?) of a plain number of seconds or an RFC 3339 time; None if neither."""
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        stamp = parse_time(text) if "T" in text or "-" in text[1:] else None
        return (stamp, True) if stamp is not None else None
    return (value, False) if math.isfinite(value) else None


def read_duration(text: Any) -> float | None:
    """Seconds of "90", "90.5" or a Go duration ("1m30s"); None if it is neither or negative."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        value: float | None = float(text)
    else:
        raw = str(text).strip()
        try:
            value = float(raw)
        except ValueError:
            value = parse_duration(raw)
    return value if value is not None and math.isfinite(value) and value >= 0 else None


def build(inputs: ClusterInput, csv_paths: Iterable[str] = (), *, texts: dict[str, str] | None = None) -> History:
    """The history of a loaded snapshot plus CSV traces, closed (see `close`). Its problems and
    warnings are the input's lists: what the scheduler finds when it loads profiles lands there
    too. `texts` gives a trace's content instead of its file (tests)."""
    history = History(inputs=inputs, problems=inputs.problems, warnings=inputs.warnings)
    for path in csv_paths:
        read_trace(path, history, text=(texts or {}).get(path))
    from_trace = {id(e.loaded): e for e in history.entries}
    history.entries = []
    # What the controllers and admission would have done, before the pods' times are read.
    expand_workloads(inputs)
    apply_priority_classes(inputs)
    generate_resource_claims(inputs)
    for loaded in inputs.pods:
        entry = from_trace.get(id(loaded)) or _snapshot_entry(loaded, history.problems)
        if entry is not None:
            history.entries.append(entry)
    close(history)
    return history


def _snapshot_entry(loaded: Loaded, problems: list[str]) -> Entry | None:
    obj = loaded.obj
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    bound = bool((obj.get("spec") or {}).get("nodeName"))
    arrival = None if bound else parse_time(meta.get("creationTimestamp"))
    entry = Entry(loaded, arrival, _absolute=(arrival is not None, False))
    if DURATION_ANNOTATION in annotations:
        entry.duration = read_duration(annotations[DURATION_ANNOTATION])
        if entry.duration is None:
            problems.append(loaded.problem(f"metadata.annotations[{DURATION_ANNOTATION}]: "
                                           f"{annotations[DURATION_ANNOTATION]!r} is not a duration "
                                           "(seconds, or such as 90s, 1h30m)"))
            return None
    if DEPARTURE_ANNOTATION in annotations:
        departure = parse_time(annotations[DEPARTURE_ANNOTATION])
        if departure is None:
            problems.append(loaded.problem(f"metadata.annotations[{DEPARTURE_ANNOTATION}]: "
                                           f"{annotations[DEPARTURE_ANNOTATION]!r} is not an RFC 3339 time"))
            return None
        entry.departure = departure
        entry._absolute = (entry._absolute[0], True)
    return entry


def read_trace(path: str, history: History, *, text: str | None = None) -> None:
    """Add the pods of CSV trace `path` to `history` (as Pods in history.inputs too)."""
    if text is None:
        try:
            with open(path, encoding="utf-8", newline="") as stream:
                text = stream.read()
        except OSError as exc:
            history.problems.append(f"{path}: cannot read: {exc.strerror or exc}")
            return
        except UnicodeDecodeError:
            history.problems.append(f"{path}: cannot read: not UTF-8 text")
            return
    lines = [(number, line) for number, line in enumerate(text.splitlines(), 1)
             if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        history.problems.append(f"{path}: empty trace: no header and no rows")
        return
    rows = csv.reader(io.StringIO("\n".join(line for _, line in lines)))
    header = [column.strip() for column in next(rows)]
    columns, problem = _columns(header)
    if problem:
        history.problems.append(f"{path}:{lines[0][0]}: header: {problem}")
        return
    ignored = [name for name, role in zip(header, columns, strict=True) if role is None]
    if ignored:
        history.warnings.append(f"warning: {path}: columns ignored: {', '.join(ignored)}")
    count = 0
    for (number, _), row in zip(lines[1:], rows, strict=True):
        where = f"{path}:{number}"
        if len(row) != len(header):
            history.problems.append(f"{where}: {len(row)} fields, the header has {len(header)}")
            continue
        entry = _row_entry(where, path, dict(zip(header, row, strict=True)), columns, header, history.problems)
        if entry is not None:
            history.entries.append(entry)
            history.inputs.pods.append(entry.loaded)
            count += 1
    if count == 0 and not history.problems:
        history.problems.append(f"{path}: empty trace: a header and no rows")


def _columns(header: list[str]) -> tuple[list[tuple[str, str] | None], str]:
    """Each column's role: (field, "") or (resource, unit suffix); None for an ignored column."""
    roles: list[tuple[str, str] | None] = []
    for column in header:
        name = _ALIASES.get(column, column)
        if name in _FIELDS:
            roles.append(("field:" + name, ""))
        elif column in _SCALED:
            roles.append(_SCALED[column])
        elif name in _PLAIN_RESOURCES or "/" in name:
            roles.append((name, ""))
        else:
            roles.append(None)
    found = [role[0] for role in roles if role is not None]
    repeated = sorted({f for f in found if found.count(f) > 1})
    if repeated:
        return roles, "more than one column for " + ", ".join(r.removeprefix("field:") for r in repeated)
    missing = [f for f in ("name", "arrival") if "field:" + f not in found]
    if missing:
        return roles, f"no {' or '.join(missing)} column (the columns are: {', '.join(header)})"
    return roles, ""


def _row_entry(where: str, source: str, row: dict[str, str], columns: list[tuple[str, str] | None],
               header: list[str], problems: list[str]) -> Entry | None:
    values: dict[str, str] = {}
    requests: dict[str, str] = {}
    for column, role in zip(header, columns, strict=True):
        if role is None:
            continue
        cell = row[column].strip()
        name, suffix = role
        if name.startswith("field:"):
            values[name[6:]] = cell
        elif cell:
            text = cell + suffix
            try:
                if quantity_value(name, text) < 0:
                    raise QuantityError(text)
            except (QuantityError, ValueError, ArithmeticError):
                problems.append(f"{where}: {column}: {cell!r} is not a quantity")
                return None
            if quantity_value(name, text):
                requests[name] = text
    name = values.get("name", "")
    if not name:
        problems.append(f"{where}: name: required")
        return None
    arrival = read_time(values.get("arrival", ""))
    if arrival is None:
        problems.append(f"{where}: arrival: {values.get('arrival', '')!r} is not a time (seconds or RFC 3339)")
        return None
    departure = None
    if values.get("departure"):
        departure = read_time(values["departure"])
        if departure is None:
            problems.append(f"{where}: departure: {values['departure']!r} is not a time (seconds or RFC 3339)")
            return None
    duration = None
    if values.get("duration"):
        duration = read_duration(values["duration"])
        if duration is None:
            problems.append(f"{where}: duration: {values['duration']!r} is not a duration "
                            "(seconds, or such as 90s, 1h30m)")
            return None
    priority: int | None = None
    if values.get("priority"):
        try:
            priority = int(values["priority"])
        except ValueError:
            problems.append(f"{where}: priority: {values['priority']!r} is not an integer")
            return None
    selector = _pairs(values.get("nodeSelector", ""))
    if selector is None:
        problems.append(f"{where}: nodeSelector: {values['nodeSelector']!r} is not key=value;key=value")
        return None
    tolerations = _tolerations(values.get("tolerations", ""))
    if tolerations is None:
        problems.append(f"{where}: tolerations: {values['tolerations']!r} is not key=value:Effect;key:Effect")
        return None
    pod = trace_pod(name, namespace=values.get("namespace") or "default", requests=requests,
                    scheduler_name=values.get("schedulerName") or "", priority=priority)
    if selector:
        pod["spec"]["nodeSelector"] = selector
    if tolerations:
        pod["spec"]["tolerations"] = tolerations
    document = Document(pod, source, where)
    inputs = ClusterInput()
    add_document(inputs, document)
    if inputs.problems:
        problems.extend(inputs.problems)
        return None
    return Entry(inputs.pods[0], arrival[0], duration, departure[0] if departure else None,
                 _absolute=(arrival[1], bool(departure and departure[1])))


def _pairs(text: str) -> dict[str, str] | None:
    pairs: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(";"))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            return None
        pairs[key.strip()] = value.strip()
    return pairs


def _tolerations(text: str) -> list[Obj] | None:
    """`key=value:Effect` (Equal) or `key:Effect` (Exists), `;` between; the effect may be left out."""
    tolerations: list[Obj] = []
    for item in filter(None, (part.strip() for part in text.split(";"))):
        head, _, effect = item.partition(":")
        key, sep, value = head.partition("=")
        if not key.strip() or effect.strip() not in ("", "NoSchedule", "PreferNoSchedule", "NoExecute"):
            return None
        toleration: Obj = {"key": key.strip(), "operator": "Equal" if sep else "Exists"}
        if sep:
            toleration["value"] = value.strip()
        if effect.strip():
            toleration["effect"] = effect.strip()
        tolerations.append(toleration)
    return tolerations


def trace_pod(name: str, *, namespace: str = "default", requests: dict[str, str] | None = None,
              scheduler_name: str = "", priority: int | None = None) -> Obj:
    """The Pod a trace row stands for: one container with the row's requests (as limits too,
    for the extended resources, which Kubernetes requires)."""
    requests = requests or {}
    limits = {name: value for name, value in requests.items() if name not in _PLAIN_RESOURCES}
    resources: Obj = {"requests": dict(requests)}
    if limits:
        resources["limits"] = limits
    spec: Obj = {"containers": [{"name": "main", "image": "trace", "resources": resources}]}
    if scheduler_name:
        spec["schedulerName"] = scheduler_name
    if priority is not None:
        spec["priority"] = priority
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": f"{namespace}-{name}"},
            "spec": spec, "status": {"phase": "Pending"}}


def close(history: History) -> None:
    """Fix the origin, make every time relative to it, and check what only the whole history
    shows: departures before arrivals, repeated pods, nothing to replay."""
    absolute = [e.arrival for e in history.entries if e.arrival is not None and e._absolute[0]]
    history.origin = min(absolute) if absolute else None
    if history.origin is None and any(e._absolute[1] for e in history.entries):
        departures = [e.departure for e in history.entries if e.departure is not None and e._absolute[1]]
        history.origin = min(departures)
    origin = history.origin or 0.0
    for entry in history.entries:
        if entry.arrival is not None and entry._absolute[0]:
            entry.arrival -= origin
        if entry.departure is not None and entry._absolute[1]:
            entry.departure -= origin
        entry._absolute = (False, False)
    seen: dict[str, str] = {}
    for entry in history.entries:
        where = entry.loaded.where or entry.loaded.source
        if entry.key in seen:
            history.problems.append(f"{where}: pod {entry.key}: already given at {seen[entry.key]}")
            continue
        seen[entry.key] = where
        if entry.departure is not None and entry.arrival is not None and entry.departure < entry.arrival:
            history.problems.append(f"{where}: pod {entry.key}: departure {_seconds(entry.departure)} is before "
                                    f"its arrival {_seconds(entry.arrival)}")
    if not history.problems and all(e.bound for e in history.entries):
        history.problems.append("nothing to replay: no pod arrives (every pod is bound already, or none is given)")
    if not history.problems and not history.inputs.nodes:
        history.problems.append("nothing to replay on: no Nodes in the input")


def _seconds(value: float) -> str:
    return f"{value:g}s"


def trace_paths(paths: Iterable[str]) -> tuple[list[str], list[str]]:
    """(YAML inputs, CSV traces) of the command line."""
    yaml_paths: list[str] = []
    csv_paths: list[str] = []
    for path in paths:
        (csv_paths if path.lower().endswith(".csv") else yaml_paths).append(path)
    return yaml_paths, csv_paths

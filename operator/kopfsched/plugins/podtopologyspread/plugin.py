"""PodTopologySpread: spread pods over topology domains (upstream's plugin of that name).

Extension points: PreFilter (+ AddPod/RemovePod), Filter (also batched), PreScore, Score (also
batched), NormalizeScore, EnqueueExtensions.
Args: defaultConstraints (applied to pods without constraints of their own, with the selectors of
the Services/controllers that select the pod) and defaultingType List | System (System: upstream's
hostname maxSkew 3 and zone maxSkew 5, ScheduleAnyway; the default).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kopfsched.framework.cycle_state import CycleState, StateKey
from kopfsched.framework.events import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from kopfsched.framework.handle import Handle
from kopfsched.framework.interface import SignFragment
from kopfsched.framework.labels import NodePredicate, SelectorError
from kopfsched.framework.node_table import ColumnSpec, NodeTable, label_column, label_value_codes
from kopfsched.framework.registry import ArgsError, check_known_fields
from kopfsched.framework.status import SKIP, Status
from kopfsched.framework.types import NodeInfo, PodInfo
from kopfsched.plugins.podtopologyspread import common, filtering, scoring
from kopfsched.plugins.podtopologyspread.common import (
    DO_NOT_SCHEDULE,
    HONOR,
    LABEL_HOSTNAME,
    SCHEDULE_ANYWAY,
    TopologySpreadConstraint,
)
from kopfsched.plugins.podtopologyspread.counts import MatchCounts, SelectorCounts

NAME = "PodTopologySpread"
SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"

PRE_FILTER_STATE = StateKey[filtering.PreFilterState](NAME, "PreFilter")
PRE_SCORE_STATE = StateKey[scoring.PreScoreState](NAME, "PreScore")

_MAX_COUNT_COLUMNS = 64
"""Per-selector pod-count columns kept on the NodeTable (least recently used are dropped)."""

_MAX_INCLUSION_MASKS = 256
"""Node inclusion masks kept (the oldest go)."""


_DEFAULT_SELECTORS_KEPT = 4096
"""Default constraints kept per namespace (pods with labels of their own each add one)."""


@dataclass(frozen=True, slots=True)
class PodTopologySpreadArgs:
    default_constraints: tuple[Mapping[str, Any], ...] = ()
    """Constraints for pods that have none (defaultingType List); must not set labelSelector."""
    defaulting_type: str = SYSTEM_DEFAULTING
    """System (upstream's built-in constraints) or List (default_constraints)."""
    _extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> PodTopologySpreadArgs:
        problems: list[tuple[str, str]] = []
        check_known_fields(raw, {"defaultConstraints", "defaultingType"}, problems)
        constraints = raw.get("defaultConstraints") or []
        if not isinstance(constraints, list):
            problems.append(("defaultConstraints", "must be a list"))
            constraints = []
        defaulting = raw.get("defaultingType") or SYSTEM_DEFAULTING
        if defaulting not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
            problems.append(("defaultingType", f'Unsupported value: "{defaulting}": supported values: '
                                               f'"{SYSTEM_DEFAULTING}", "{LIST_DEFAULTING}"'))
        elif defaulting == SYSTEM_DEFAULTING and constraints:
            problems.append(("defaultingType",
                             f'Invalid value: "{defaulting}": when .defaultConstraints are not empty'))
        seen: set[tuple[str, object]] = set()
        for i, c in enumerate(constraints):
            path = f"defaultConstraints[{i}]"
            if not isinstance(c, Mapping):
                problems.append((path, "must be an object"))
                continue
            max_skew = c.get("maxSkew", 0)  # unset decodes to 0
            if isinstance(max_skew, bool) or not isinstance(max_skew, int) or max_skew <= 0:
                problems.append((f"{path}.maxSkew", f"Invalid value: {max_skew}: not in valid range (0, inf)"))
            key = c.get("topologyKey") or ""
            if not key:
                problems.append((f"{path}.topologyKey", "Required value: can not be empty"))
            action = c.get("whenUnsatisfiable")
            if not action:
                problems.append((f"{path}.whenUnsatisfiable", "Required value: can not be empty"))
            elif action not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
                problems.append((f"{path}.whenUnsatisfiable", f'Unsupported value: "{action}": supported values: '
                                                              f'"{DO_NOT_SCHEDULE}", "{SCHEDULE_ANYWAY}"'))
            if c.get("labelSelector") is not None:
                problems.append((f"{path}.labelSelector",
                                 "Forbidden: constraint must not define a selector, as they deduced for each pod"))
            if (key, action) in seen:
                problems.append((path, f"Duplicate value: \"{{{key}, {action}}}\""))
            seen.add((key, action))
        if problems:
            raise ArgsError(problems)
        return cls(default_constraints=tuple(constraints), defaulting_type=defaulting)


def _value_key(value: Any) -> str:
    """A key equal for equal JSON values (dicts in the same key order): repr, cheaper than
    canonical JSON; values equal but for key order only miss each other's cache entries."""
    return repr(value)


def _affinity_key(pod: PodInfo) -> str | None:
    """The key of the pod's nodeSelector and required node affinity; None when it has
    neither (`common.required_node_affinity` is None exactly then)."""
    node_selector = pod.spec.get("nodeSelector")
    required = (pod.affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if not node_selector and required is None:
        return None
    return _value_key([node_selector, required])


def _affinity_rows(pod: PodInfo, table: NodeTable, affinity: NodePredicate) -> np.ndarray | None:
    """`affinity` (the pod's `common.required_node_affinity`) for every row, called once per
    distinct combination of the values of the labels it reads rather than once per node; None
    when it may read more than those labels (a term with matchFields reads the node's name)."""
    node_selector = pod.spec.get("nodeSelector") or {}
    required = (pod.affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    terms = (required.get("nodeSelectorTerms") or ()) if isinstance(required, Mapping) else ()
    if not isinstance(node_selector, Mapping) or not isinstance(terms, (list, tuple)):
        return None
    keys: dict[Any, None] = dict.fromkeys(node_selector)
    for term in terms:
        if not isinstance(term, Mapping) or term.get("matchFields"):
            return None
        for expression in term.get("matchExpressions") or ():
            if not isinstance(expression, Mapping):
                return None
            keys[expression.get("key", "")] = None
    if not all(isinstance(key, str) for key in keys):
        return None
    if not keys:  # reads no label: the same answer for every node
        return np.full(len(table), bool(affinity({}, "")), dtype=bool)
    labels = list(keys)
    columns = [table.column(label_column(key)) for key in labels]
    if len(columns) == 1:
        distinct, inverse = np.unique(columns[0], return_inverse=True)
        combinations = [(code,) for code in distinct.tolist()]
    else:
        distinct, inverse = np.unique(np.stack(columns, axis=1), axis=0, return_inverse=True)
        combinations = distinct.tolist()
    names = [list(label_value_codes(key)) for key in labels]
    answers = [bool(affinity({key: values[code] for key, values, code in zip(labels, names, combination, strict=True)
                              if code >= 0}, "")) for combination in combinations]
    return np.asarray(answers, dtype=bool)[inverse.reshape(-1)]


def _pod_info(obj: Any) -> PodInfo | None:
    if obj is None or isinstance(obj, PodInfo):
        return obj
    return PodInfo(obj)


def _node_parts(obj: Any) -> tuple[Mapping[str, str], list[Any]]:
    if isinstance(obj, NodeInfo):
        return obj.labels, obj.taints
    obj = obj or {}
    return ((obj.get("metadata") or {}).get("labels") or {}), ((obj.get("spec") or {}).get("taints") or [])


def _controller_key(pod: PodInfo) -> tuple[Any, Any, Any] | None:
    ref = common.controller_of(pod)
    return None if ref is None else (ref.get("apiVersion"), ref.get("kind"), ref.get("name"))


def _with_selector(constraints: list[TopologySpreadConstraint],
                   selector: common.Selector) -> list[TopologySpreadConstraint]:
    return [TopologySpreadConstraint(c.max_skew, c.topology_key, selector, c.min_domains,
                                     c.node_affinity_policy, c.node_taints_policy) for c in constraints]


class PodTopologySpread:
    name = NAME

    def __init__(self, args: PodTopologySpreadArgs | None, handle: Handle) -> None:
        args = args or PodTopologySpreadArgs()
        self.args = args
        self.handle = handle
        self.system_defaulted = args.defaulting_type == SYSTEM_DEFAULTING
        self.default_constraints: tuple[Mapping[str, Any], ...] = (
            common.SYSTEM_DEFAULT_CONSTRAINTS if self.system_defaulted else args.default_constraints)
        self.signs_no_pod = bool(self.default_constraints)
        """OpportunisticBatching: with default constraints no pod is signed, as upstream."""
        self._count_columns: OrderedDict[str, ColumnSpec] = OrderedDict()
        self._match_counts = MatchCounts()
        """The snapshot table's per-selector counts (other tables use `_count_columns`)."""
        self._inclusion: dict[tuple[str, str, str | None, str | None], np.ndarray] = {}
        """Node inclusion masks over the table below, by policies, node affinity and tolerations."""
        self._inclusion_table: NodeTable | None = None
        self._inclusion_version = -1
        self._eligible: dict[tuple[tuple[str, ...], int], tuple[np.ndarray | None, np.ndarray]] = {}
        """(required topology keys, id of an inclusion mask or 0) -> (that mask, the rows that
        have every key and that mask includes), over the table above."""
        self._masked_presence: dict[tuple[str, int], tuple[np.ndarray, tuple[bool, list[int]]]] = {}
        """(label key, id of a kept mask) -> (that mask, `_label_presence` over its rows)."""
        self._tainted: bool | None = None
        """Whether some node of the table above has a taint; None: not known yet."""
        self._affinities: dict[str, NodePredicate] = {}
        """`_affinity_key` -> the compiled required node affinity."""
        self._names: dict[str, list[str]] = {}
        """Label key -> its values by code."""
        self._presence: dict[str, tuple[bool, list[int]]] = {}
        self._presence_table: NodeTable | None = None
        self._presence_version = -1
        # Whether some default constraint is hard / soft: asked for every pod without its own.
        self._hard_defaults = any(c.get("whenUnsatisfiable") == DO_NOT_SCHEDULE for c in self.default_constraints)
        self._soft_defaults = any(c.get("whenUnsatisfiable") == SCHEDULE_ANYWAY for c in self.default_constraints)
        # Without a labelSelector (the args forbid one), the default constraints parse the
        # same for every pod: parsed once per action.
        self._defaults_parsed: dict[str, list[TopologySpreadConstraint]] | None = (
            {} if all(c.get("labelSelector") is None for c in self.default_constraints) else None)
        self._default_constraints: dict[str, dict[tuple[Any, ...], list[TopologySpreadConstraint]]] = {}
        """namespace -> (pod labels, controller, action) -> the pod's default constraints."""
        self._own_parsed: dict[tuple[str, str, str | None], list[TopologySpreadConstraint]] = {}
        """(the pod's own constraints, action, its labels if read) -> those constraints, parsed."""
        self._own_last: tuple[Any, str, bool] | None = None
        """The last own constraints read (kept, so never another object of the same id), their
        key and whether they read the pod's labels."""
        self._selector_cursors: dict[str, int] = {}
        """Where `_default_constraints` is in the change log of each kind the selectors read."""

    # -- constraints ---------------------------------------------------------------------------

    def _build_default_constraints(self, pod: PodInfo, action: str) -> list[TopologySpreadConstraint]:
        parsed = self._defaults_parsed
        if parsed is None:
            constraints = common.filter_constraints(self.default_constraints, pod.labels, action)
        elif action in parsed:
            constraints = parsed[action]
        else:
            constraints = parsed[action] = common.filter_constraints(self.default_constraints, {}, action)
        if not constraints:
            return []
        if parsed is None:
            selector = self._parse_default_selector(pod)
            if selector is None:
                return []
            return _with_selector(constraints, selector)
        # The default selector depends on the pod's namespace, labels and controller alone (and
        # on the Services and controllers, whose changes drop a namespace's entries).
        self._sync_default_selectors()
        key = (frozenset(pod.labels.items()), _controller_key(pod), action)
        by_namespace = self._default_constraints.setdefault(pod.namespace, {})
        cached = by_namespace.get(key)
        if cached is None:
            if len(by_namespace) >= _DEFAULT_SELECTORS_KEPT:
                by_namespace.clear()
            selector = self._parse_default_selector(pod)
            cached = by_namespace[key] = [] if selector is None else _with_selector(constraints, selector)
        return list(cached)

    def _parse_default_selector(self, pod: PodInfo) -> common.Selector | None:
        raw = common.default_selector(pod, self.handle.objects)
        if not raw.get("matchLabels") and not raw.get("matchExpressions"):
            return None  # Selector.of(raw) would be empty: not compiled for nothing
        selector = common.Selector.of(raw)
        return None if selector.empty else selector

    def _sync_default_selectors(self) -> None:
        cursors = self._selector_cursors
        for kind in common.DEFAULT_SELECTOR_KINDS:
            cursor, changed = self.handle.objects.changes(kind, cursors.get(kind))
            cursors[kind] = cursor
            if changed is None:
                self._default_constraints.clear()
            else:
                for namespace, _ in changed:
                    self._default_constraints.pop(namespace, None)

    def constraints(self, pod: PodInfo, action: str) -> list[TopologySpreadConstraint]:
        """The pod's constraints for `action`, or the default ones when it declares none."""
        own = pod.spec.get("topologySpreadConstraints")
        if own:
            return self._own_constraints(own, pod.labels, action)
        return self._build_default_constraints(pod, action)

    def _own_constraints(self, own: Any, labels: Mapping[str, str], action: str) -> list[TopologySpreadConstraint]:
        """`common.filter_constraints` of the pod's own constraints, parsed once per distinct
        constraints (and labels, when some constraint merges matchLabelKeys): pods of one
        workload share them. Errors are not kept: each pod with them raises again."""
        last = self._own_last
        if last is not None and last[0] is own:
            # The pod's PreFilter, then its PreScore: the same (immutable) constraints.
            own_key, reads_labels = last[1], last[2]
        else:
            reads_labels = any(isinstance(c, Mapping) and c.get("matchLabelKeys") for c in own) \
                if isinstance(own, list) else True
            own_key = _value_key(own)
            self._own_last = (own, own_key, reads_labels)
        key = (own_key, action, _value_key(labels) if reads_labels else None)
        cached = self._own_parsed.get(key)
        if cached is None:
            cached = common.filter_constraints(own, labels, action)
            if len(self._own_parsed) >= _DEFAULT_SELECTORS_KEPT:
                self._own_parsed.clear()
            self._own_parsed[key] = cached
        return list(cached)

    # -- per-node pod counts, cached as NodeTable columns ---------------------------------------

    def _count_column(self, table: NodeTable, selector: common.Selector, namespace: str) -> np.ndarray:
        if type(table) is NodeTable and table is self.handle.snapshot.table:
            return self._match_counts.counts(table, selector, namespace)
        name = f"{NAME}:{namespace}:{selector.signature}"
        spec = self._count_columns.get(name)
        if spec is None:
            spec = ColumnSpec(name, lambda n: common.count_pods_match_selector(n, selector, namespace))
            self._count_columns[name] = spec
            if len(self._count_columns) > _MAX_COUNT_COLUMNS:
                _, oldest = self._count_columns.popitem(last=False)
                table.drop(oldest)
        else:
            self._count_columns.move_to_end(name)
        return table.column(spec)

    def _inclusion_mask(self, c: TopologySpreadConstraint, pod: PodInfo, table: NodeTable,
                        affinity: NodePredicate | None) -> np.ndarray | None:
        """Rows excluded by the node inclusion policies; None when every node is included."""
        honor_affinity = c.node_affinity_policy == HONOR and affinity is not None
        if type(table) is not NodeTable:
            honor_taints = c.node_taints_policy == HONOR and any(n.taints for n in table.nodes)
            if not (honor_affinity or honor_taints):
                return None
            return self._compute_inclusion(c, pod, table, affinity)
        # The policies read the Node objects alone (labels, name, taints): the mask holds while
        # the table and its Node objects do, for every pod with this node affinity and these
        # tolerations.
        self._sync_masks(table)
        honor_taints = c.node_taints_policy == HONOR and self._some_taints(table)
        if not (honor_affinity or honor_taints):
            return None
        key = (c.node_affinity_policy, c.node_taints_policy, _affinity_key(pod) if honor_affinity else None,
               _value_key(pod.tolerations) if honor_taints else None)
        mask = self._inclusion.get(key)
        if mask is None:
            mask = self._inclusion[key] = self._compute_inclusion(c, pod, table, affinity)
            if len(self._inclusion) > _MAX_INCLUSION_MASKS:
                del self._inclusion[next(iter(self._inclusion))]
        return mask

    @staticmethod
    def _compute_inclusion(c: TopologySpreadConstraint, pod: PodInfo, table: NodeTable,
                           affinity: NodePredicate | None) -> np.ndarray:
        nodes = table.nodes
        matched = None
        if c.node_affinity_policy == HONOR and affinity is not None and type(table) is NodeTable:
            matched = _affinity_rows(pod, table, affinity)
        if matched is None:
            return np.fromiter((common.match_node_inclusion_policies(c, pod, n, affinity) for n in nodes),
                               dtype=bool, count=len(nodes))
        if c.node_taints_policy == HONOR:
            tolerations = pod.tolerations
            matched &= np.fromiter((not n.taints or not common.has_untolerated_do_not_schedule_taint(n, tolerations)
                                    for n in nodes), dtype=bool, count=len(nodes))
        return matched

    def _sync_masks(self, table: NodeTable) -> None:
        """Forget the masks (and what is read from the Node objects) of another table or of
        Node objects that changed since."""
        if self._inclusion_table is not table or self._inclusion_version != table.node_version:
            self._inclusion.clear()
            self._eligible.clear()
            self._masked_presence.clear()
            self._tainted = None
            self._inclusion_table, self._inclusion_version = table, table.node_version

    def _some_taints(self, table: NodeTable) -> bool:
        """Whether some node of the table has a taint (after `_sync_masks`)."""
        if self._tainted is None:
            self._tainted = any(n.taints for n in table.nodes)
        return self._tainted

    def _required_node_affinity(self, pod: PodInfo) -> NodePredicate | None:
        """`common.required_node_affinity`, compiled once per nodeSelector and required node
        affinity (an error is raised again for every pod that has it)."""
        key = _affinity_key(pod)
        if key is None:
            return None
        affinity = self._affinities.get(key)
        if affinity is None:
            compiled = common.required_node_affinity(pod)
            assert compiled is not None  # a key: the pod has a nodeSelector or a required node affinity
            if len(self._affinities) >= _MAX_INCLUSION_MASKS:
                self._affinities.clear()
            affinity = self._affinities[key] = compiled
        return affinity

    def _domain_counts(self, constraints: list[TopologySpreadConstraint], pod: PodInfo, nodes: list[NodeInfo],
                       affinity: NodePredicate | None, *, required_keys: Iterable[str]) -> list[dict[str, int]]:
        """Per constraint, matching pods per topology value over the nodes that have every
        `required_keys` label and pass the constraint's inclusion policies. A node lacking the
        constraint's own key counts under the value "" (only possible without required keys)."""
        required_keys = tuple(required_keys)
        table = self.handle.snapshot.table
        if len(table) == len(nodes) and len(nodes) > 0:
            return self._domain_counts_table(constraints, pod, table, affinity, required_keys)
        result: list[dict[str, int]] = [{} for _ in constraints]
        for node in nodes:
            labels = node.labels
            if node.node is None or not all(k in labels for k in required_keys):
                continue
            for i, c in enumerate(constraints):
                if not common.match_node_inclusion_policies(c, pod, node, affinity):
                    continue
                value = labels.get(c.topology_key, "")
                result[i][value] = result[i].get(value, 0) + common.count_pods_match_selector(
                    node, c.selector, pod.namespace)
        return result

    def _domain_counts_table(self, constraints: list[TopologySpreadConstraint], pod: PodInfo, table: NodeTable,
                             affinity: NodePredicate | None, required_keys: tuple[str, ...]) -> list[dict[str, int]]:
        # On the snapshot table, the per-domain totals MatchCounts keeps (over every row, as with
        # the system defaults, or over the rows a kept mask includes).
        snapshot = type(table) is NodeTable and table is self.handle.snapshot.table
        every_row = snapshot and not any(self._label_presence(table, key)[0] for key in required_keys)
        eligible: np.ndarray | None = None
        result: list[dict[str, int]] = []
        for c in constraints:
            included = self._inclusion_mask(c, pod, table, affinity)
            if every_row and included is None:
                result.append(self._domain_totals(table, c, pod.namespace))
                continue
            if snapshot:
                kept = self._eligible_mask(table, required_keys, included)
                assert kept is not None  # some row lacks a required key, or `included` is a mask
                result.append(self._domain_totals(table, c, pod.namespace, kept))
                continue
            if eligible is None:
                eligible = np.ones(len(table), dtype=bool)
                for key in required_keys:
                    eligible &= table.column(label_column(key)) >= 0
            mask = eligible
            if included is not None:
                mask = mask & included
            counts = self._count_column(table, c.selector, pod.namespace)[mask]
            codes = table.column(label_column(c.topology_key))[mask]
            values = list(label_value_codes(c.topology_key))
            missing = codes < 0
            per_value: dict[str, int] = {}
            if missing.any():
                per_value[""] = int(counts[missing].sum())
                codes, counts = codes[~missing], counts[~missing]
            totals = np.bincount(codes, weights=counts, minlength=len(values))
            for k in np.flatnonzero(np.bincount(codes, minlength=len(values))).tolist():
                per_value[values[k]] = per_value.get(values[k], 0) + int(totals[k])
            result.append(per_value)
        return result

    def _domain_totals(self, table: NodeTable, c: TopologySpreadConstraint, namespace: str,
                       mask: np.ndarray | None = None) -> dict[str, int]:
        """`_domain_counts_table`'s counts for one constraint over every row, or over the rows
        of a kept mask."""
        key = c.topology_key
        totals = self._match_counts.domain_totals(table, c.selector, namespace, key, mask).tolist()
        some_missing, present = self._label_presence(table, key) if mask is None else \
            self._mask_presence(table, key, mask)
        values = self._value_names(key)
        per_value: dict[str, int] = {}
        if some_missing:
            per_value[""] = totals[0]
        for k in present:
            per_value[values[k]] = per_value.get(values[k], 0) + totals[k + 1]
        return per_value

    def _mask_presence(self, table: NodeTable, key: str, mask: np.ndarray) -> tuple[bool, list[int]]:
        """`_label_presence` over the rows of a kept mask (after `_sync_masks`)."""
        found = self._masked_presence.get((key, id(mask)))
        if found is not None and found[0] is mask:
            return found[1]
        codes = table.column(label_column(key))[mask]
        per_code = np.bincount(codes + 1, minlength=len(label_value_codes(key)) + 1)
        presence = (bool(per_code[0]), np.flatnonzero(per_code[1:]).tolist())
        if len(self._masked_presence) >= _MAX_INCLUSION_MASKS:
            self._masked_presence.clear()
        self._masked_presence[(key, id(mask))] = (mask, presence)
        return presence

    def _label_presence(self, table: NodeTable, key: str) -> tuple[bool, list[int]]:
        """(whether some row lacks label `key`, the codes of its values on some row, ascending),
        kept while the table and its Node objects are."""
        if self._presence_table is not table or self._presence_version != table.node_version:
            self._presence.clear()
            self._presence_table, self._presence_version = table, table.node_version
        found = self._presence.get(key)
        if found is None:
            codes = table.column(label_column(key))
            per_code = np.bincount(codes + 1, minlength=len(label_value_codes(key)) + 1)
            found = self._presence[key] = (bool(per_code[0]), np.flatnonzero(per_code[1:]).tolist())
        return found

    # -- PreFilter / Filter -------------------------------------------------------------------

    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | None:
        """Pods with spread constraints are not signed (with default constraints none is:
        `signs_no_pod`)."""
        return None if pod.spec.get("topologySpreadConstraints") else []

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        if not pod.spec.get("topologySpreadConstraints") and not self._hard_defaults:
            return SKIP
        try:
            constraints = self.constraints(pod, DO_NOT_SCHEDULE)
            if not constraints:
                return SKIP
            affinity = self._required_node_affinity(pod)
        except SelectorError as error:
            return Status.as_error(f"obtaining pod's hard topology spread constraints: {error}")
        counts = self._domain_counts(constraints, pod, nodes, affinity,
                                     required_keys=[c.topology_key for c in constraints])
        state.write(PRE_FILTER_STATE, filtering.PreFilterState(constraints, tp_value_to_match_num=counts).finish())
        return None

    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node: NodeInfo) -> Status | None:
        state.read(PRE_FILTER_STATE).update_with_pod(pod_to_add, pod, node, 1, self._required_node_affinity(pod))
        return None

    def remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node: NodeInfo) -> Status | None:
        state.read(PRE_FILTER_STATE).update_with_pod(pod_to_remove, pod, node, -1,
                                                     self._required_node_affinity(pod))
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        return filtering.filter_node(state.read(PRE_FILTER_STATE), pod, node)

    def filter_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        return filtering.filter_rows(state.read(PRE_FILTER_STATE), pod, table, rows)

    # -- PreScore / Score ---------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        all_nodes = self.handle.snapshot.node_infos()
        if not all_nodes:
            return SKIP
        own = pod.spec.get("topologySpreadConstraints")
        if not own and not self._soft_defaults:
            return SKIP
        try:
            constraints = self.constraints(pod, SCHEDULE_ANYWAY)
        except SelectorError as error:
            return Status.as_error(f"calculating preScoreState: {error}")
        if not constraints:
            return SKIP
        # Nodes without a zone label may still be spread by hostname under the system defaults.
        pre_score = scoring.PreScoreState(constraints, require_all_topologies=bool(own) or not self.system_defaulted)
        rows = self._snapshot_rows(nodes)
        table = self.handle.snapshot.table
        if rows is None:
            scoring.init_pre_score_state(pre_score, nodes)
            self._count_pre_score_domains(pre_score, pod, all_nodes)
        elif len(table) != len(all_nodes):
            scoring.init_pre_score_state_rows(pre_score, table, rows)
            self._count_pre_score_domains(pre_score, pod, all_nodes)
        else:
            self._pre_score_rows(pre_score, pod, table, rows)
        state.write(PRE_SCORE_STATE, pre_score)
        return None

    def _pre_score_rows(self, s: scoring.PreScoreState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> None:
        """`init_pre_score_state_rows`, then `_count_pre_score_domains`, for rows of the
        snapshot table: the domains as label codes, counted from the per-domain totals that
        MatchCounts keeps (per inclusion mask), and each domain's score for Score to look up."""
        constraints = s.constraints
        presence = [self._label_presence(table, c.topology_key) for c in constraints]
        ignored: np.ndarray | None = None
        if s.require_all_topologies:
            for c, (some_missing, _) in zip(constraints, presence, strict=True):
                if some_missing:  # else no row lacks the key
                    lacking = table.column(label_column(c.topology_key))[rows] < 0
                    ignored = lacking if ignored is None else ignored | lacking
        some_ignored = ignored is not None and bool(ignored.any())
        kept = rows
        s.ignored = np.zeros(len(rows), dtype=bool) if ignored is None else ignored
        s.some_ignored = some_ignored
        if some_ignored:
            assert ignored is not None
            kept = rows[~ignored]
            nodes = table.nodes
            s.ignored_nodes = frozenset(nodes[r].name for r in rows[ignored].tolist())
        affinity: NodePredicate | None = None
        affinity_read = False  # read for the first constraint counted here
        required = tuple(c.topology_key for c in constraints) if s.require_all_topologies else ()
        match_counts = self._match_counts
        registered: list[dict[str, int]] = []
        weights: list[float] = []
        parts: list[np.ndarray | None] = []
        hosts: list[np.ndarray | None] = []
        # The system defaults share one selector: its counts are brought up to date once.
        entry: SelectorCounts | None = None
        entry_of: common.Selector | None = None
        for c, (some_missing, present) in zip(constraints, presence, strict=True):
            key = c.topology_key
            if c.selector is not entry_of:
                entry, entry_of = match_counts.entry(table, c.selector, pod.namespace), c.selector
            if key == LABEL_HOSTNAME:  # per-node counts are read in Score
                registered.append({})
                weights.append(scoring.topology_normalizing_weight(len(kept)))
                parts.append(None)
                hosts.append(np.zeros(len(table), dtype=np.int64) if entry is None else entry.array)
                continue
            hosts.append(None)
            column = table.column(label_column(key))
            # In the order of the nodes' first appearance, as the loop over nodes registers them;
            # when the first rows show every value of the table, they show every first appearance
            # (a few rows show a few zones: looked at before more rows).
            distinct = len(present) + some_missing
            first = list(dict.fromkeys(column[kept[:scoring.FIRST_FEW_ROWS]].tolist()))
            if len(first) != distinct:
                first = list(dict.fromkeys(column[kept[:scoring.FIRST_ROWS]].tolist()))
                if len(first) != distinct:
                    first = scoring.first_appearance(column[kept])
            if not affinity_read:
                affinity, affinity_read = self._required_node_affinity(pod), True
            # Without node affinity or honoured taints every node is included (the system defaults').
            mask = None if affinity is None and c.node_taints_policy != HONOR else \
                self._inclusion_mask(c, pod, table, affinity)
            if required:
                mask = self._eligible_mask(table, required, mask)
            codes = label_value_codes(key)
            size = len(codes) + 1
            totals = [0] * size if entry is None else \
                MatchCounts.entry_totals(entry, table, key, column, size, mask).tolist()
            names = self._value_names(key)
            counts: dict[str, int] = {}
            for code in first:
                counts[names[code] if code >= 0 else ""] = totals[code + 1]
            weight = scoring.topology_normalizing_weight(len(counts))
            registered.append(counts)
            weights.append(weight)
            # What lookup_by_label reads in Score, scored as Score would: in Python floats, the
            # same IEEE operations as numpy's (a count of 0 scores maxSkew - 1 exactly).
            skew = float(c.max_skew - 1)
            per_code = [skew] * size
            if "" in counts:  # a label value "" is also the domain of the nodes without the label
                empty = codes.get("")
                counts[""] = totals[0] + (totals[empty + 1] if empty is not None and empty + 1 < len(totals) else 0)
                for value, n in counts.items():
                    code = codes.get(value)
                    if code is not None:
                        per_code[code] = n * weight + skew
            else:
                for code in first:
                    per_code[code] = totals[code + 1] * weight + skew
            parts.append(np.array(per_code))
        s.topology_value_to_pod_counts = registered
        s.topology_normalizing_weight = weights
        s.domain_scores = parts
        s.domain_scores_of = (table, table.node_version)
        s.host_counts = hosts
        s.labelled = [not some_missing for some_missing, _ in presence]
        s.counted_at = (table, table.version)

    def _eligible_mask(self, table: NodeTable, required: tuple[str, ...],
                       included: np.ndarray | None) -> np.ndarray | None:
        """The rows that have every `required` label and that `included` includes; None for
        every row. Kept while the table and its Node objects are."""
        if not required or not any(self._label_presence(table, key)[0] for key in required):
            return included
        self._sync_masks(table)
        key = (required, 0 if included is None else id(included))
        found = self._eligible.get(key)
        if found is not None and found[0] is included:
            return found[1]
        mask = np.ones(len(table), dtype=bool)
        for label in required:
            mask &= table.column(label_column(label)) >= 0
        if included is not None:
            mask &= included
        if len(self._eligible) >= _MAX_INCLUSION_MASKS:
            self._eligible.clear()
        self._eligible[key] = (included, mask)
        return mask

    def _value_names(self, key: str) -> list[str]:
        """The values of label `key` by code (`label_value_codes(key)` inverted)."""
        codes = label_value_codes(key)
        names = self._names.get(key)
        if names is None or len(names) != len(codes):
            names = self._names[key] = list(codes)
        return names

    def _snapshot_rows(self, nodes: Sequence[NodeInfo]) -> np.ndarray | None:
        """The snapshot table's rows of `nodes`, None when some node is not one of its rows."""
        table = self.handle.snapshot.table
        if type(table) is not NodeTable or not nodes:
            return None
        rows_of = getattr(nodes, "rows_of", None)  # the scheduler's LazyNodes: rows, no list built
        if rows_of is not None and rows_of[0] is table:
            return np.asarray(rows_of[1], dtype=np.int64)
        index, table_nodes = table.index, table.nodes
        rows = np.fromiter((index.get(n.name, -1) for n in nodes), dtype=np.int64, count=len(nodes))
        if (rows < 0).any() or any(table_nodes[r] is not n for r, n in zip(rows.tolist(), nodes, strict=True)):
            return None
        return rows

    def _count_pre_score_domains(self, s: scoring.PreScoreState, pod: PodInfo, all_nodes: list[NodeInfo]) -> None:
        """Add the matching pods of every node to the domains registered from the feasible nodes."""
        counted = [(i, c) for i, c in enumerate(s.constraints) if c.topology_key != LABEL_HOSTNAME]
        if not counted:
            return
        required = [c.topology_key for c in s.constraints] if s.require_all_topologies else []
        counts = self._domain_counts([c for _, c in counted], pod, all_nodes, self._required_node_affinity(pod),
                                     required_keys=required)
        for (i, _), per_value in zip(counted, counts, strict=True):
            registered = s.topology_value_to_pod_counts[i]
            for value, n in per_value.items():
                if value in registered:
                    registered[value] += n

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        return scoring.score_node(state.read(PRE_SCORE_STATE), pod, node)

    def score_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        s = state.read(PRE_SCORE_STATE)
        if s.counted_at is not None and s.counted_at[0] is table and s.counted_at[1] == table.version:
            # Nothing refreshed since PreScore read the snapshot table's counts.
            assert s.host_counts is not None
            hosts = [None if counts is None else counts[rows] for counts in s.host_counts]
            return scoring.score_rows(s, pod, table, rows, hosts, s.labelled, s.domain_scores)
        hosts = [self._count_column(table, c.selector, pod.namespace)[rows] if c.topology_key == LABEL_HOSTNAME
                 else None for c in s.constraints]
        labelled = None
        domain_scores = None
        if type(table) is NodeTable and table is self.handle.snapshot.table:
            labelled = [not self._label_presence(table, c.topology_key)[0] for c in s.constraints]
            if s.domain_scores_of is not None and s.domain_scores_of[0] is table \
                    and s.domain_scores_of[1] == table.node_version:
                domain_scores = s.domain_scores
        return scoring.score_rows(s, pod, table, rows, hosts, labelled, domain_scores)

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: np.ndarray) -> np.ndarray:
        return scoring.normalize(state.read(PRE_SCORE_STATE), scores)

    # -- queueing hints -----------------------------------------------------------------------

    def events_to_register(self) -> Iterable[ClusterEventWithHint]:
        pod_actions = (ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.UPDATE_POD_TOLERATION
                       | ActionType.DELETE)
        node_actions = ActionType.ADD | ActionType.DELETE | ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_TAINT
        return (
            ClusterEventWithHint(ClusterEvent(EventResource.POD, pod_actions), self.is_schedulable_after_pod_change),
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, node_actions), self.is_schedulable_after_node_change),
        )

    def is_schedulable_after_pod_change(self, pod: Any, old: Any, new: Any) -> QueueingHint:
        target, original, modified = _pod_info(pod), _pod_info(old), _pod_info(new)
        assert target is not None

        def involved(other: PodInfo) -> bool:
            return other.uid == target.uid or (bool(other.node_name) and other.namespace == target.namespace)

        if (modified is not None and not involved(modified)) or (original is not None and not involved(original)):
            return QueueingHint.SKIP
        constraints = self.constraints(target, DO_NOT_SCHEDULE)
        if original is not None and modified is not None:
            if (target.uid == modified.uid and modified.tolerations != original.tolerations
                    and any(c.node_taints_policy == HONOR for c in constraints)):
                return QueueingHint.QUEUE
            if modified.labels == original.labels:
                return QueueingHint.SKIP
            changed = any(c.selector.matches(original.labels) != c.selector.matches(modified.labels)
                          for c in constraints)
            return QueueingHint.QUEUE if changed else QueueingHint.SKIP
        other = modified if modified is not None else original
        assert other is not None
        if common.pod_labels_match_spread_constraints(constraints, other.labels):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def is_schedulable_after_node_change(self, pod: Any, old: Any, new: Any) -> QueueingHint:
        target = _pod_info(pod)
        assert target is not None
        constraints = self.constraints(target, DO_NOT_SCHEDULE)
        original = _node_parts(old) if old is not None else None
        modified = _node_parts(new) if new is not None else None
        original_matching = original is not None and common.node_labels_match_spread_constraints(
            original[0], constraints)
        modified_matching = modified is not None and common.node_labels_match_spread_constraints(
            modified[0], constraints)
        if original is not None and modified is not None:
            if original_matching != modified_matching:
                return QueueingHint.QUEUE
            keys_changed = any(original[0].get(c.topology_key) != modified[0].get(c.topology_key)
                               for c in constraints)
            if modified_matching and (keys_changed or original[1] != modified[1]):
                return QueueingHint.QUEUE
            return QueueingHint.SKIP
        if modified is not None:
            return QueueingHint.QUEUE if modified_matching else QueueingHint.SKIP
        return QueueingHint.QUEUE if original_matching else QueueingHint.SKIP

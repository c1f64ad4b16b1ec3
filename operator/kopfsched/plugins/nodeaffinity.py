"""NodeAffinity: the pod's `nodeSelector` and required node affinity decide which nodes it
may use (Filter); its preferred terms rank them (Score). The `addedAffinity` arg lets a
profile enforce a node selector on, and add preferences to, every pod it schedules.

Selectors follow upstream's component-helpers/scheduling/corev1/nodeaffinity: terms are
ORed, an empty term matches nothing, and a term that does not parse matches nothing
(without failing the pod) while the other terms still count.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import not_ as operator_not
from typing import Any

import numpy as np

from kopfsched.framework.cycle_state import CycleState, StateKey
from kopfsched.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, EventResource, QueueingHint
from kopfsched.framework.interface import MAX_NODE_SCORE, PreFilterResult, SignFragment
from kopfsched.framework.labels import SelectorError, node_selector_term
from kopfsched.framework.node_table import NodeTable, label_codes, label_in, label_lookup
from kopfsched.framework.registry import ArgsError, PluginFactory, check_known_fields
from kopfsched.framework.status import SKIP, Status, TalliedStatuses
from kopfsched.framework.types import NodeInfo, Obj, PodInfo
from kopfsched.plugins.helper import objects, signers
from kopfsched.plugins.helper.normalize_score import default_normalize_score

ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"

NAME_FIELD = "metadata.name"

Labels = Mapping[str, str]
TermMatcher = Callable[[Labels, str], bool]


# --- selectors ---------------------------------------------------------------------------


def _never(labels: Labels, name: str) -> bool:
    return False


def compile_term(term: Mapping[str, Any]) -> TermMatcher:
    """A NodeSelectorTerm as a predicate over (node labels, node name); raises SelectorError."""
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    for expr in expressions:
        operator, values = expr.get("operator"), expr.get("values") or []
        if operator in ("In", "NotIn") and not values:
            raise SelectorError(f"{operator} requires at least one value for key {expr.get('key')!r}")
        if operator in ("Exists", "DoesNotExist") and values:
            raise SelectorError(f"{operator} takes no values for key {expr.get('key')!r}")
    match_labels = node_selector_term({"matchExpressions": expressions}) if expressions else None
    wanted: list[tuple[str, bool, str]] = []
    for expr in fields:
        operator, values = expr.get("operator"), expr.get("values") or []
        if operator not in ("In", "NotIn"):
            raise SelectorError(f"{operator!r} is not a valid field selector operator")
        if len(values) != 1:
            raise SelectorError(f"matchFields {expr.get('key')!r}: values must have one element")
        wanted.append((expr.get("key", ""), operator == "In", values[0]))

    def match(labels: Labels, name: str) -> bool:
        if match_labels is not None and not match_labels(labels, name):
            return False
        if wanted and name:  # Upstream checks fields only when the node has a name.
            node_fields = {NAME_FIELD: name}
            return all((node_fields.get(key, "") == value) == equal for key, equal, value in wanted)
        return True

    return match


def _is_empty(term: Mapping[str, Any]) -> bool:
    return not term.get("matchExpressions") and not term.get("matchFields")


def _expression_rows(table: NodeTable, rows: np.ndarray, expr: Mapping[str, Any]) -> np.ndarray:
    """Per row: one parsed node selector requirement holds (labels.py's `_requirement`)."""
    key, operator = expr.get("key", ""), expr.get("operator")
    values: Sequence[str] = expr.get("values") or ()
    if operator == "In":
        return label_in(table, rows, key, values)
    if operator == "NotIn":
        return ~label_in(table, rows, key, values)
    if operator in ("Exists", "DoesNotExist"):
        present = label_codes(table, rows, key) >= 0
        return present if operator == "Exists" else ~present
    bound, greater = int(values[0]), operator == "Gt"  # Gt/Lt: the term parsed, so the bound is an integer

    def compare(value: str | None) -> bool:
        try:
            number = int(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False
        return number > bound if greater else number < bound

    return label_lookup(table, rows, key, compare)


def _term_rows(table: NodeTable, rows: np.ndarray, term: Mapping[str, Any]) -> np.ndarray:
    """Per row: `compile_term(term)` matches the node (the term parsed)."""
    passed = np.ones(len(rows), dtype=bool)
    for expr in term.get("matchExpressions") or ():
        passed &= _expression_rows(table, rows, expr)
    fields = term.get("matchFields") or ()
    if fields:
        names = table.nodes
        node_names = [names[r].name for r in rows.tolist()]
        for expr in fields:
            equal, value = expr.get("operator") == "In", expr["values"][0]
            if expr.get("key", "") == NAME_FIELD:
                found = np.fromiter((n == value or not n for n in node_names), dtype=bool, count=len(rows))
                passed &= found if equal else ~found | np.fromiter(map(operator_not, node_names), dtype=bool,
                                                                    count=len(rows))
            elif (value == "") != equal:  # no other field: the node's value is ""
                passed &= np.fromiter(map(operator_not, node_names), dtype=bool, count=len(rows))
    return passed


class NodeSelector:
    """A v1.NodeSelector: its terms ORed. Empty terms are dropped; terms that fail to parse
    never match (`errors` lists them)."""

    def __init__(self, selector: Mapping[str, Any]) -> None:
        self.terms: list[TermMatcher] = []
        self.parsed: list[Mapping[str, Any] | None] = []
        """Each of `terms` as written, None where it failed to parse: what `match_rows` reads."""
        self.errors: list[tuple[str, str]] = []
        """(path, message) of each term that failed to parse."""
        for i, term in enumerate(selector.get("nodeSelectorTerms") or ()):
            if _is_empty(term):
                continue
            try:
                self.terms.append(compile_term(term))
                self.parsed.append(term)
            except SelectorError as exc:
                self.errors.append((f"nodeSelectorTerms[{i}]", str(exc)))
                self.terms.append(_never)
                self.parsed.append(None)

    def match(self, labels: Labels, name: str) -> bool:
        return any(term(labels, name) for term in self.terms)

    def match_rows(self, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        """`match` for each of `rows`, as mask operations on the table's label columns."""
        matched = np.zeros(len(rows), dtype=bool)
        for term in self.parsed:
            if term is not None:
                matched |= _term_rows(table, rows, term)
        return matched

    def names_fields(self) -> bool:
        """Some term has matchFields (its rows then depend on node names, not only labels)."""
        return any(term is not None and term.get("matchFields") for term in self.parsed)


class PreferredSchedulingTerms:
    """Weighted terms; a node scores the sum of the weights of the terms it matches.
    Terms with weight 0 or an empty preference are ignored; a bad term is an error."""

    def __init__(self, terms: Sequence[Mapping[str, Any]]) -> None:
        self.terms: list[tuple[int, TermMatcher]] = []
        self.parsed: list[tuple[int, Mapping[str, Any]]] = []
        """`terms` as written, with their weights: what `score_rows` reads."""
        self._key: str | None = None
        errors: list[str] = []
        for i, term in enumerate(terms):
            weight = term.get("weight") or 0
            preference = term.get("preference") or {}
            if not weight or _is_empty(preference):
                continue
            try:
                self.terms.append((weight, compile_term(preference)))
                self.parsed.append((weight, preference))
            except SelectorError as exc:
                errors.append(f"[{i}].preference: {exc}")
        if errors:
            raise SelectorError("; ".join(errors))

    def score(self, labels: Labels, name: str) -> int:
        return sum(weight for weight, match in self.terms if match(labels, name))

    def score_rows(self, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        """`score` for each of `rows`, as mask operations on the table's label columns."""
        total = np.zeros(len(rows), dtype=np.int64)
        for weight, term in self.parsed:
            total += np.where(_term_rows(table, rows, term), weight, 0)
        return total

    def key(self) -> str | None:
        """NodeTable.derived's key for `score_rows` (None when a term names nodes by field)."""
        if self._key is None:
            if any(term.get("matchFields") for _, term in self.parsed):
                return None
            self._key = json.dumps(self.parsed, sort_keys=True, default=str)
        return self._key


class RequiredNodeAffinity:
    """A pod's nodeSelector AND its required node affinity (upstream's GetRequiredNodeAffinity)."""

    __slots__ = ("_key", "node_selector", "selector")

    def __init__(self, pod_spec: Mapping[str, Any]) -> None:
        self.selector: dict[str, str] | None = dict(pod_spec.get("nodeSelector") or {}) or None
        required = _required_terms(pod_spec)
        self.node_selector = NodeSelector(required) if required is not None else None
        self._key: str | None = None

    def key(self) -> str | None:
        """What the rows that match depend on, for NodeTable.derived: the selectors as JSON
        (pods of one shape share it); None when a term names nodes by field."""
        if self._key is None:
            if self.node_selector is not None and self.node_selector.names_fields():
                return None
            self._key = json.dumps([self.selector, [t for t in self.node_selector.parsed if t is not None]
                                    if self.node_selector is not None else None], sort_keys=True, default=str)
        return self._key

    def match(self, labels: Labels, name: str) -> bool:
        if self.selector is not None and any(labels.get(k) != v for k, v in self.selector.items()):
            return False
        return self.node_selector is None or self.node_selector.match(labels, name)

    def match_rows(self, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        """`match` for each of `rows`, as mask operations on the table's label columns."""
        matched = np.ones(len(rows), dtype=bool)
        for key, value in (self.selector or {}).items():
            matched &= label_in(table, rows, key, (value,))
        if self.node_selector is not None:
            matched &= self.node_selector.match_rows(table, rows)
        return matched


def _node_affinity(pod_spec: Mapping[str, Any]) -> Obj:
    return (pod_spec.get("affinity") or {}).get("nodeAffinity") or {}


def _required_terms(pod_spec: Mapping[str, Any]) -> Obj | None:
    return _node_affinity(pod_spec).get("requiredDuringSchedulingIgnoredDuringExecution")


def _node_labels_and_name(node: Obj | None) -> tuple[Labels, str]:
    meta = objects.meta(node)
    return meta.get("labels") or {}, meta.get("name") or ""


# --- args --------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeAffinityArgs:
    """Upstream's NodeAffinityArgs."""

    added_affinity: Obj | None = None
    """A NodeAffinity applied to every pod of the profile: its required selector must also
    match (reason "didn't match scheduler-enforced node affinity"), its preferred terms add
    to the score."""

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> NodeAffinityArgs:
        problems: list[tuple[str, str]] = []
        check_known_fields(raw, {"addedAffinity"}, problems)
        added = raw.get("addedAffinity")
        if added is not None and not isinstance(added, Mapping):
            problems.append(("addedAffinity", "must be an object"))
        elif added is not None:
            _validate_added_affinity(added, problems)
        if problems:
            raise ArgsError(problems)
        return cls(added_affinity=dict(added) if added is not None else None)


def _validate_added_affinity(added: Mapping[str, Any], problems: list[tuple[str, str]]) -> None:
    required = added.get("requiredDuringSchedulingIgnoredDuringExecution")
    path = "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    if required is not None:
        problems.extend((f"{path}.{where}", message) for where, message in NodeSelector(required).errors)
    preferred = added.get("preferredDuringSchedulingIgnoredDuringExecution") or []
    try:
        PreferredSchedulingTerms(preferred)
    except SelectorError as exc:
        problems.append(("addedAffinity.preferredDuringSchedulingIgnoredDuringExecution", str(exc)))


# --- plugin ------------------------------------------------------------------------------

PRE_FILTER_STATE = StateKey[RequiredNodeAffinity]("NodeAffinity", "PreFilterNodeAffinity")
PRE_SCORE_STATE = StateKey["PreferredSchedulingTerms | None"]("NodeAffinity", "PreScoreNodeAffinity")


class NodeAffinity:
    name = "NodeAffinity"
    node_static_filter = True  # reads the Node object only: checked once per node in preemption

    def __init__(self, args: NodeAffinityArgs | None, handle: Any = None) -> None:
        args = args or NodeAffinityArgs()
        added = args.added_affinity or {}
        required = added.get("requiredDuringSchedulingIgnoredDuringExecution")
        self.added_node_selector = NodeSelector(required) if required is not None else None
        preferred = added.get("preferredDuringSchedulingIgnoredDuringExecution")
        self.added_pref_terms = PreferredSchedulingTerms(preferred) if preferred else None
        names_fields = self.added_node_selector is not None and self.added_node_selector.names_fields()
        self._added_key: object | None = ("NodeAffinity/addedAffinity", object()) if not names_fields else None
        """NodeTable.derived's key for the rows the added affinity matches (this instance's own)."""

    # PreFilter / Filter

    def sign_pod(self, pod: PodInfo) -> list[SignFragment]:
        return signers.node_affinity(pod)

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> PreFilterResult | Status | None:
        required = _required_terms(pod.spec)
        if required is None and self.added_node_selector is None and not pod.spec.get("nodeSelector"):
            return SKIP  # Nothing for Filter to check.
        state.write(PRE_FILTER_STATE, RequiredNodeAffinity(pod.spec))
        terms = (required or {}).get("nodeSelectorTerms") or []
        if not terms:
            return None
        node_names = _node_names_from_terms(terms)
        if node_names is None:
            return None
        if not node_names:
            return Status.unresolvable(ERR_REASON_CONFLICT)
        return PreFilterResult(frozenset(node_names))

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if self.added_node_selector is not None and not self.added_node_selector.match(node.labels, node.name):
            return Status.unresolvable(ERR_REASON_ENFORCED)
        required = state.get(PRE_FILTER_STATE)
        if required is None:  # PreFilter disabled: compute here.
            required = RequiredNodeAffinity(pod.spec)
        if not required.match(node.labels, node.name):
            return Status.unresolvable(ERR_REASON_POD)
        return None

    def filter_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows)
        passed = self._added_rows(table, rows)
        required = self._required(state, pod)
        key = required.key()
        if key is None:
            return passed & required.match_rows(table, rows)
        return passed & table.derived(("NodeAffinity", key), required.match_rows, rows, _match_one(required),
                                      node_static=True)  # labels and names

    def filter_statuses(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> list[Status]:
        # Two reasons at most: one shared Status each, in the order `filter` checks them.
        pod_status = Status.unresolvable(ERR_REASON_POD)
        if self.added_node_selector is None:
            return TalliedStatuses.same(pod_status, len(rows))
        enforced = Status.unresolvable(ERR_REASON_ENFORCED)
        added = self._added_rows(table, np.asarray(rows))
        return TalliedStatuses.of_codes(added, lambda ok: pod_status if ok else enforced)

    def _added_rows(self, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        if self.added_node_selector is None:
            return np.ones(len(rows), dtype=bool)
        selector = self.added_node_selector
        if self._added_key is None:
            return selector.match_rows(table, rows)
        return table.derived(self._added_key, selector.match_rows, rows, _match_one(selector), node_static=True)

    @staticmethod
    def _required(state: CycleState, pod: PodInfo) -> RequiredNodeAffinity:
        required = state.get(PRE_FILTER_STATE)
        return RequiredNodeAffinity(pod.spec) if required is None else required  # None: PreFilter disabled

    # PreScore / Score

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        try:
            preferred = _pod_preferred_terms(pod)
        except SelectorError as exc:
            return Status.as_error(exc)
        if preferred is None and self.added_pref_terms is None:
            return SKIP  # Nothing for Score to rank.
        state.write(PRE_SCORE_STATE, preferred)
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        count = 0
        if self.added_pref_terms is not None:
            count += self.added_pref_terms.score(node.labels, node.name)
        try:
            preferred = state.read(PRE_SCORE_STATE)
        except KeyError:  # PreScore disabled: compute here.
            preferred = _pod_preferred_terms(pod)
        if preferred is not None:
            count += preferred.score(node.labels, node.name)
        return count

    def score_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        """`score` for each of `rows`: each term set's weighted matches, kept per term set."""
        try:
            preferred = state.read(PRE_SCORE_STATE)
        except KeyError:  # PreScore disabled: compute here.
            preferred = _pod_preferred_terms(pod)
        total = np.zeros(len(rows), dtype=np.int64)
        for terms in (self.added_pref_terms, preferred):
            if terms is None:
                continue
            key = terms.key()  # the scores depend on the terms and the labels alone
            if key is None:
                total += terms.score_rows(table, rows)
            else:
                total += table.derived(("NodeAffinity/preferred", key), terms.score_rows, rows, _score_one(terms),
                                       node_static=True)
        return total

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: np.ndarray) -> np.ndarray:
        return default_normalize_score(scores, max_priority=MAX_NODE_SCORE, reverse=False)

    # Queueing

    def events_to_register(self) -> Iterable[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
                                 self.is_schedulable_after_node_change),
        ]

    def is_schedulable_after_node_change(self, pod: Any, old: Any, new: Any) -> QueueingHint:
        """Queue when a node that matches the pod appears, or a node starts to match it."""
        labels, name = _node_labels_and_name(objects.raw(new))
        if self.added_node_selector is not None and not self.added_node_selector.match(labels, name):
            return QueueingHint.SKIP
        required = RequiredNodeAffinity(objects.spec(objects.raw(pod)))
        if not required.match(labels, name):
            return QueueingHint.SKIP
        if old is None:
            return QueueingHint.QUEUE
        old_labels, old_name = _node_labels_and_name(objects.raw(old))
        return QueueingHint.SKIP if required.match(old_labels, old_name) else QueueingHint.QUEUE


def _match_one(selector: NodeSelector | RequiredNodeAffinity) -> Callable[[NodeTable, int], bool]:
    """NodeTable.derived's `compute_one`: the selector's `match` on one row's node."""
    def match_one(table: NodeTable, row: int) -> bool:
        node = table.nodes[row]
        return selector.match(node.labels, node.name)
    return match_one


def _score_one(terms: PreferredSchedulingTerms) -> Callable[[NodeTable, int], int]:
    """NodeTable.derived's `compute_one`: the terms' `score` on one row's node."""
    def score_one(table: NodeTable, row: int) -> int:
        node = table.nodes[row]
        return terms.score(node.labels, node.name)
    return score_one


def _pod_preferred_terms(pod: PodInfo) -> PreferredSchedulingTerms | None:
    terms = _node_affinity(pod.spec).get("preferredDuringSchedulingIgnoredDuringExecution")
    return PreferredSchedulingTerms(terms) if terms is not None else None


def _node_names_from_terms(terms: Sequence[Mapping[str, Any]]) -> set[str] | None:
    """Nodes named by `metadata.name In` fields: intersected within a term, united across
    terms. None when some term names no node (then any node may match)."""
    names: set[str] = set()
    for term in terms:
        term_names: set[str] | None = None
        for expr in term.get("matchFields") or ():
            if expr.get("key") == NAME_FIELD and expr.get("operator") == "In":
                values = set(expr.get("values") or ())
                term_names = values if term_names is None else term_names & values
        if term_names is None:
            return None
        names |= term_names
    return names


PLUGIN = PluginFactory(name=NodeAffinity.name, factory=NodeAffinity, args_type=NodeAffinityArgs)

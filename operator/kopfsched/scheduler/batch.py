"""OpportunisticBatching (beta, on in v1.37): a pod with the same signature as the pod just
scheduled takes the next node of that pod's ranking, once it passes Filter, instead of a
full Filter and Score pass.

As upstream's framework/runtime/batch.go: the ranking is kept only after a cycle that
scheduled a signed pod on one of several feasible nodes; it serves the very next cycle
(the next pod popped, of the same profile), a pod with the same signature and no nominated
node, for at most half a second. Before each hint the node chosen last is filtered for the
new pod again and, when it still fits, rescored (its fresh raw scores normalized with the
others' kept ones) to compete with the rest. Pods that spread or have inter-pod affinity,
claims, or DRA-backed extended resources have no signature, and on a profile whose
PodTopologySpread has default constraints (the default profile's system defaults) no pod
has one: there every pod gets a full cycle, in v1.37 too.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from kopfsched.cache.snapshot import Snapshot
from kopfsched.framework.cycle_state import CycleState
from kopfsched.framework.runtime import Framework
from kopfsched.framework.types import PodInfo

logger = logging.getLogger(__name__)

MAX_BATCH_AGE = 0.5
"""Seconds a kept ranking serves (upstream's maxBatchAge)."""


@dataclass
class _Ranking:
    """upstream's batchState: the previous pod's feasible nodes but the chosen one, best first."""

    signature: str
    names: list[str]
    raw: dict[str, np.ndarray]
    """Per Score plugin not skipped, the raw scores of `names`, in their order."""
    created: float


class OpportunisticBatch:
    """One profile's batching state (upstream's OpportunisticBatch)."""

    def __init__(self, *, clock: Callable[[], float], rng: random.Random) -> None:
        self.clock = clock
        self.rng = rng
        self.ranking: _Ranking | None = None
        self.last_cycle = -2
        self.last_chosen = ""
        self.hint = ""
        """The hint of the cycle under way ("" none), which `store` compares with the chosen node."""
        self.batched_pods = 0
        """Pods placed on a hint (upstream counts them for its tests)."""

    def node_hint(self, fwk: Framework, state: CycleState, pod: PodInfo, signature: str | None,
                  cycle: int, snapshot: Snapshot) -> str:
        """The node to try alone first, or "" (upstream's GetNodeHint); kept as `hint`."""
        self.hint = ""
        ranking = self.ranking
        if ranking is None or not ranking.names or cycle != self.last_cycle + 1:
            return ""
        if (pod.pod.get("status") or {}).get("nominatedNodeName") or signature is None \
                or signature != ranking.signature or self.clock() > ranking.created + MAX_BATCH_AGE:
            return ""
        if not self._refresh(fwk, state, pod, ranking, snapshot):
            return ""
        self.hint = ranking.names.pop(0)
        for name, scores in ranking.raw.items():
            ranking.raw[name] = scores[1:]
        return self.hint

    def store(self, signature: str | None, chosen: str, cycle: int, *,
              names: list[str] | None = None, totals: np.ndarray | None = None,
              raw: dict[str, np.ndarray] | None = None, best: int = -1) -> None:
        """After a cycle that chose `chosen` (upstream's StoreScheduleResults): with a full
        ranking (`names`, their `totals` and `raw` scores, `best` the chosen one's index) it
        is kept for the next pod unless the hint was taken."""
        self.last_cycle, self.last_chosen = cycle, chosen
        if self.hint and self.hint == chosen:
            self.batched_pods += 1
            return
        if signature is None or names is None or totals is None or raw is None or len(names) < 2:
            self.ranking = None
            return
        keep = np.ones(len(names), dtype=bool)
        keep[best] = False
        order = self._best_first(totals[keep])
        rest = np.flatnonzero(keep)[order]
        self.ranking = _Ranking(signature, [names[i] for i in rest.tolist()],
                                {name: scores[rest] for name, scores in raw.items()}, self.clock())

    def _best_first(self, totals: np.ndarray) -> np.ndarray:
        """Positions of `totals` from the highest, ties in a random order: upstream's heap
        leaves ties to its own layout (its per-node random number is set only with
        extenders), for which a random order stands in, as in select_host."""
        randomizer = np.array([self.rng.random() for _ in range(len(totals))])
        return np.lexsort((randomizer, -totals))

    def _refresh(self, fwk: Framework, state: CycleState, pod: PodInfo, ranking: _Ranking,
                 snapshot: Snapshot) -> bool:
        """upstream's refreshHintCandidates: the node chosen last, filtered again for this pod,
        rejoins the ranking rescored when it still fits; False drops the hint."""
        last = snapshot.get(self.last_chosen)
        if last is None or last.node is None:
            return False
        status = fwk.run_filter_plugins(state, pod, last)
        if status is not None:
            return status.is_rejection
        nodes = [node for name in ranking.names if (node := snapshot.get(name)) is not None]
        if len(nodes) != len(ranking.names):
            return False
        rescore = state.clone()
        if fwk.run_pre_score_plugins(rescore, pod, [*nodes, last]) is not None:
            return False
        table = snapshot.table
        fresh: dict[str, np.ndarray] = {}
        _, _, status = fwk.run_score_plugins_on_rows(rescore, pod, table, np.array([table.index[last.name]]),
                                                     raw=fresh)
        if status is not None or set(fresh) != set(ranking.raw):
            return False
        raw = {name: np.concatenate((ranking.raw[name], fresh[name])) for name in fresh}
        totals, _, status = fwk.normalize_scores(rescore, pod, raw, len(ranking.names) + 1)
        if status is not None:
            return False
        names = [*ranking.names, last.name]
        order = self._best_first(totals)
        ranking.names = [names[i] for i in order.tolist()]
        ranking.raw = {name: scores[order] for name, scores in raw.items()}
        return True

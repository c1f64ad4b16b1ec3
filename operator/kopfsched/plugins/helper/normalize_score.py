"""DefaultNormalizeScore, as upstream's plugins/helper/normalize_score.go."""

from __future__ import annotations

import numpy as np

try:  # numpy's C function, without np.count_nonzero's Python dispatch
    from numpy._core.multiarray import count_nonzero
except ImportError:  # numpy < 2
    from numpy.core.multiarray import count_nonzero  # type: ignore[no-redef]

from kopfsched.framework.interface import MAX_NODE_SCORE


def default_normalize_score(scores: np.ndarray, *, max_priority: int = MAX_NODE_SCORE,
                            reverse: bool = False) -> np.ndarray:
    """Scale scores linearly so the highest becomes `max_priority`; `reverse` flips them
    (max_priority - score), so the lowest raw score ranks best.

    As upstream: the maximum is taken over non-negative values; when it is 0, scores stay
    as they are, or all become `max_priority` when reversed. Division truncates like Go's.
    """
    scores = np.asarray(scores, dtype=np.int64)
    # All zero (the usual answer of a plugin with nothing to prefer): known without a maximum,
    # which costs ten times count_nonzero's fixed price.
    max_count = max(int(scores[scores.argmax()]), 0) if count_nonzero(scores) else 0  # the maximum, cheaply
    if max_count == 0:
        if not reverse:
            return scores.copy()
        out = np.empty_like(scores)
        out.fill(max_priority)  # np.full_like, without its Python wrapper: this runs every cycle
        return out
    scaled = max_priority * scores
    normalized = np.sign(scaled) * (np.abs(scaled) // max_count)
    return max_priority - normalized if reverse else normalized

"""Where the out-of-tree example plugin (examples/qos-sort-plugin) lives, and its distribution name."""

from __future__ import annotations

import pathlib

EXAMPLE = pathlib.Path(__file__).parents[2] / "examples" / "qos-sort-plugin"
DISTRIBUTION = "kopfsched-qos-sort"

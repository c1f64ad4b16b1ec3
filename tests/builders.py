"""Pod and node builders for tests; they live in kopfsched.testing, public for plugin authors."""

from kopfsched.testing import make_node, make_pod, node_info, taint

__all__ = ["make_node", "make_pod", "node_info", "taint"]

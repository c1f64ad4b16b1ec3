"""Helpers shared by in-tree plugins (upstream's plugins/helper and component-helpers).

- `normalize_score`: DefaultNormalizeScore.
- `tolerations`: taint/toleration matching (v1helper.ToleratesTaint and friends).
- `objects`: reading the objects queueing hints receive.
"""

"""kopfsched: kube-scheduler's scheduling framework as a Python asyncio operator on kopf."""

__version__ = "0.1.0"

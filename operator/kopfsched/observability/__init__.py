"""Prometheus metrics with upstream names, and the /healthz and /readyz server."""

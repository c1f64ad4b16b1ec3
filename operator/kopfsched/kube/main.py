"""`kopfsched run`: options from the command line and the --config file, then the operator
(kube/operator.py) until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Mapping
from typing import Any

from kopfsched.config.parse import ConfigFileError, load_config_file
from kopfsched.kube.leader import LeaseConfig
from kopfsched.kube.operator import EXIT_FAILED, Operator, OperatorOptions, StartupError
from kopfsched.plugins.registry import full_registry

SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
DEFAULT_LEASE_NAME = "kopfsched"
"""Upstream's default lease is kube-system/kube-scheduler: the default scheduler's own. Ours
defaults to a name of its own in the operator's namespace."""


def options_from(*, kubeconfig: str | None, config_file: str | None, leader_elect: bool | None,
                 metrics_port: int | None, serving: Mapping[str, Any] | None = None) -> OperatorOptions:
    """The operator's options: the flags, else the --config file's settings, else defaults.
    `serving`: OperatorOptions' secure-serving fields (secure_port, bind_address, tls_cert_file,
    ...) as the flags give them. Raises ConfigFileError for an unreadable or invalid --config."""
    config = load_config_file(config_file, full_registry()) if config_file else None
    election = config.leader_election if config else None
    connection = config.client_connection if config else None
    options = OperatorOptions(kubeconfig=kubeconfig, metrics_port=metrics_port, scheduler_config=config,
                              **(serving or {}))
    if connection is not None:
        options.qps, options.burst = connection.qps, connection.burst
    options.leader_elect = leader_elect if leader_elect is not None else (election.leader_elect if election else True)
    options.lease = LeaseConfig(
        name=(election.resource_name if election else None) or DEFAULT_LEASE_NAME,
        namespace=(election.resource_namespace if election else None) or own_namespace(),
        lease_duration=election.lease_duration_seconds if election else 15.0,
        renew_deadline=election.renew_deadline_seconds if election else 10.0,
        retry_period=election.retry_period_seconds if election else 2.0,
    )
    return options


def own_namespace() -> str:
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    with contextlib.suppress(OSError), open(SERVICE_ACCOUNT_NAMESPACE, encoding="utf-8") as file:
        return file.read().strip()
    return "kopfsched-system"


def run_operator(*, kubeconfig: str | None, config_file: str | None, leader_elect: bool | None,
                 metrics_port: int | None, serving: Mapping[str, Any] | None = None) -> int:
    """The `kopfsched run` command: runs until SIGTERM/SIGINT; 1 on an invalid --config."""
    try:
        options = options_from(kubeconfig=kubeconfig, config_file=config_file, leader_elect=leader_elect,
                               metrics_port=metrics_port, serving=serving)
    except ConfigFileError as exc:
        for line in exc.lines:
            print(line, file=sys.stderr)
        return EXIT_FAILED
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return asyncio.run(_main(options))
    except StartupError as exc:
        print(f"kopfsched run: {exc}", file=sys.stderr)
        return EXIT_FAILED


async def _main(options: OperatorOptions) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with Operator.connected(options) as operator:
        return await operator.run(stop)


__all__ = ["options_from", "run_operator"]

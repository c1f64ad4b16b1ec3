"""Lease-based leader election (coordination.k8s.io/v1), as client-go's leaderelection.

A candidate takes the Lease when it is free or its holder stopped renewing it for
`lease_duration` (measured on the candidate's own clock from when it last saw the record
change, so clock skew between replicas does not matter); every write carries the
resourceVersion it read, so two candidates never both win. The leader renews every
`retry_period`; if it cannot renew for `renew_deadline` it has lost the lease. On a
clean stop the leader releases the lease so a follower takes over at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kopfsched.framework.client import ClusterError, ConflictError, NotFoundError
from kopfsched.kube.client import KubeClusterClient, micro_time
from kopfsched.kube.waiting import stopped_within

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LeaseConfig:
    name: str = "kopfsched"
    namespace: str = "kopfsched-system"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


class LeaderElector:
    def __init__(self, client: KubeClusterClient, *, config: LeaseConfig, identity: str,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.config = config
        self.identity = identity
        self.clock = clock
        self.is_leader = False
        self._observed: dict[str, Any] | None = None
        self._observed_at = 0.0
        self._path = f"/apis/coordination.k8s.io/v1/namespaces/{config.namespace}/leases/{config.name}"

    async def acquire(self, stop: asyncio.Event) -> bool:
        """Wait until this candidate holds the lease (True), or `stop` is set (False)."""
        while not stop.is_set():
            if await self._try_acquire_or_renew():
                self.is_leader = True
                logger.info("%s acquired the lease %s/%s", self.identity, self.config.namespace, self.config.name)
                return True
            await stopped_within(stop, self.config.retry_period)
        return False

    async def hold(self, stop: asyncio.Event) -> None:
        """Renew until `stop` is set or renewing fails for renew_deadline (then return with
        is_leader False: the lease is lost). Releasing on a clean stop is the caller's
        `release()`, after this task is done, so no renewal can race with it."""
        last_renewed = self.clock()
        while not stop.is_set():
            await stopped_within(stop, self.config.retry_period)
            if stop.is_set():
                break
            # One attempt may not outlive the deadline: a hung request (with the client's
            # retries) would otherwise keep us leading long after the lease expired.
            left = self.config.renew_deadline - (self.clock() - last_renewed)
            try:
                renewed = await asyncio.wait_for(self._try_acquire_or_renew(), timeout=max(left, 0.0))
            except TimeoutError:
                renewed = False
            if renewed:
                last_renewed = self.clock()
            elif self._taken_over() or self.clock() - last_renewed >= self.config.renew_deadline:
                self.is_leader = False
                logger.error("%s lost the lease %s/%s", self.identity, self.config.namespace, self.config.name)
                return

    async def release(self, *, attempts: int = 3) -> None:
        """Give the lease up so a follower takes over at once. The record is read afresh:
        a renewal cancelled mid-flight may have changed it after we last saw it."""
        if not self.is_leader:
            return
        try:
            for _ in range(attempts):
                try:
                    current = await self.client.request("GET", self._path, rate_limited=False,
                                                        what="reading the lease")
                except ClusterError as exc:
                    logger.warning("could not release the lease: %s", exc)
                    return
                if (current.get("spec") or {}).get("holderIdentity") != self.identity:
                    return  # someone else holds it already
                lease = _with_spec(current, holderIdentity=None, leaseDurationSeconds=1, renewTime=micro_time())
                try:
                    await self.client.request("PUT", self._path, body=lease, rate_limited=False,
                                              what="releasing the lease")
                    logger.info("%s released the lease %s/%s", self.identity, self.config.namespace,
                                self.config.name)
                    return
                except ConflictError:
                    continue  # changed between our read and write: read again
                except ClusterError as exc:
                    logger.warning("could not release the lease: %s", exc)
                    return
        finally:
            self.is_leader = False

    def _taken_over(self) -> bool:
        """The last record read names another holder: it acquired the lease, we lead no more."""
        holder = ((self._observed or {}).get("spec") or {}).get("holderIdentity")
        return bool(holder) and holder != self.identity

    async def _try_acquire_or_renew(self) -> bool:
        now = micro_time()
        try:
            current = await self.client.request("GET", self._path, rate_limited=False, what="reading the lease")
        except NotFoundError:
            return await self._create(now)
        except ClusterError as exc:
            logger.warning("cannot read the lease: %s", exc)
            return False
        spec = current.get("spec") or {}
        if self._observed is None or (self._observed.get("spec") or {}) != spec:
            self._observed, self._observed_at = current, self.clock()
        holder = spec.get("holderIdentity")
        duration = spec.get("leaseDurationSeconds") or self.config.lease_duration
        held_by_other = holder and holder != self.identity
        if held_by_other and self.clock() < self._observed_at + duration:
            return False
        changes: dict[str, Any] = {"holderIdentity": self.identity, "renewTime": now,
                                   "leaseDurationSeconds": int(self.config.lease_duration)}
        if holder != self.identity:
            changes["acquireTime"] = now
            changes["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        try:
            updated = await self.client.request("PUT", self._path, body=_with_spec(current, **changes),
                                                rate_limited=False, what="updating the lease")
        except ConflictError:
            return False  # someone else wrote it first
        except ClusterError as exc:
            logger.warning("cannot update the lease: %s", exc)
            return False
        self._observed, self._observed_at = updated, self.clock()
        return True

    async def _create(self, now: str) -> bool:
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": self.config.name, "namespace": self.config.namespace},
                 "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": int(self.config.lease_duration),
                          "acquireTime": now, "renewTime": now, "leaseTransitions": 0}}
        try:
            created = await self.client.request(
                "POST", f"/apis/coordination.k8s.io/v1/namespaces/{self.config.namespace}/leases", body=lease,
                rate_limited=False, what="creating the lease")
        except ClusterError as exc:  # 409: another candidate created it first
            logger.debug("cannot create the lease: %s", exc)
            return False
        self._observed, self._observed_at = created, self.clock()
        return True


def _with_spec(lease: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**lease, "spec": {**(lease.get("spec") or {}), **changes}}

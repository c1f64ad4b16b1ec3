"""The two reviews the secure port delegates to the API server (observability/secure.py
caches their answers): a TokenReview for each bearer token, a non-resource
SubjectAccessReview for each (user, verb, path). Both are creates the ClusterRole grants
(`tokenreviews` and `subjectaccessreviews`, verb create); they go through the operator's
KubeClusterClient, with a rate-limit bucket of their own so that a burst of scrapes never
delays a bind."""

from __future__ import annotations

from typing import Any

from kopfsched.kube.client import KubeClusterClient
from kopfsched.kube.ratelimit import TokenBucket
from kopfsched.observability.secure import Decision, UserInfo

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
REVIEW_QPS, REVIEW_BURST = 10.0, 20
"""Misses only (answers are cached 10 s): one scraper costs two reviews per 10 s."""


class ApiServerReviews:
    """`authenticate` and `authorize` for DelegatedAuth, asking the API server."""

    def __init__(self, client: KubeClusterClient, *, qps: float = REVIEW_QPS, burst: int = REVIEW_BURST) -> None:
        self.client = client
        self.limiter = TokenBucket(qps=qps, burst=burst)

    async def authenticate(self, token: str) -> UserInfo | None:
        review = await self.client.request(
            "POST", TOKEN_REVIEWS, body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                                         "spec": {"token": token}},
            what="TokenReview", limiter=self.limiter)
        status = _mapping(review.get("status") if isinstance(review, dict) else None)
        if not status.get("authenticated"):
            return None
        user = _mapping(status.get("user"))
        extra = _mapping(user.get("extra"))
        return UserInfo(
            username=str(user.get("username") or ""), uid=str(user.get("uid") or ""),
            groups=tuple(str(g) for g in user.get("groups") or ()),
            extra=tuple(sorted((str(k), tuple(str(v) for v in vs or ())) for k, vs in extra.items())))

    async def authorize(self, user: UserInfo, verb: str, path: str) -> Decision:
        spec: dict[str, Any] = {"nonResourceAttributes": {"path": path, "verb": verb}, "user": user.username}
        if user.uid:
            spec["uid"] = user.uid
        if user.groups:
            spec["groups"] = list(user.groups)
        if user.extra:
            spec["extra"] = {key: list(values) for key, values in user.extra}
        review = await self.client.request(
            "POST", SUBJECT_ACCESS_REVIEWS, body={"apiVersion": "authorization.k8s.io/v1",
                                                  "kind": "SubjectAccessReview", "spec": spec},
            what=lambda: f"SubjectAccessReview of {verb} {path} for {user.username}", limiter=self.limiter)
        status = _mapping(review.get("status") if isinstance(review, dict) else None)
        allowed = bool(status.get("allowed")) and not status.get("denied")
        return Decision(allowed=allowed, reason=str(status.get("reason") or ""))


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


__all__ = ["SUBJECT_ACCESS_REVIEWS", "TOKEN_REVIEWS", "ApiServerReviews"]

"""One reading of Retry-After for every request path of the kube layer (our client and kopf's
requests through kube/reachability.py), as client-go's checkWait: a 429 or any 5xx, whole
seconds. The two paths used to differ: kopf's honoured it only on 429 (and took fractions and
the body's retryAfterSeconds), ours on 500 too."""

from __future__ import annotations

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from kopfsched.kube import client, kopf_internals, reachability
from kopfsched.kube.ratelimit import retry_after_seconds

CASES = [
    pytest.param(429, {"Retry-After": "3"}, 3.0, id="429"),
    pytest.param(500, {"Retry-After": "2"}, 2.0, id="500-the-lowest-5xx"),
    pytest.param(503, {"Retry-After": "0"}, 0.0, id="503-zero"),
    pytest.param(499, {"Retry-After": "2"}, None, id="499-not-a-wait"),
    pytest.param(409, {"Retry-After": "2"}, None, id="conflict"),
    pytest.param(429, {"Retry-After": "1.5"}, None, id="fraction-not-whole-seconds"),
    pytest.param(429, {"Retry-After": "-1"}, None, id="negative"),
    pytest.param(429, {}, None, id="no-header"),
]


@pytest.mark.parametrize(("status", "headers", "expected"), CASES)
def test_retry_after_seconds(status, headers, expected):
    assert retry_after_seconds(status, headers) == expected


@pytest.mark.parametrize(("status", "headers", "expected"), CASES)
def test_our_client_and_kopfs_requests_read_it_alike(status, headers, expected):
    ours = ApiException(status=status, reason="x")
    ours.headers = headers
    kopfs = kopf_internals.APIError({"message": "x"}, status=status, headers=headers)
    assert client._retry_after(ours) == reachability._retry_after(kopfs) == expected

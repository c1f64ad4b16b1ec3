"""kube-scheduler's own framework as an oracle: tests/kubeenv/cmd/oracle, built once per
source hash under ~/.cache/kopfsched/, and run as a long-lived `oracle serve` process that
explains one pod of one snapshot file per request. Its third mode, `oracle simulate` (one
scheduler over the whole snapshot, ScheduleOne per pod, with the loop's CPU time), serves
tests/differential/test_simulate_mode.py and benchmarks/offline.py."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

KUBEENV = Path(__file__).resolve().parent.parent / "kubeenv"
CACHE = Path(os.environ.get("KOPFSCHED_CACHE", Path.home() / ".cache" / "kopfsched"))


class OracleUnavailable(Exception):
    """Go is missing (outside CI the differential tests skip); str() is the one line why."""


def source_hash() -> str:
    """Of everything the binary is built from: go.mod, go.sum and the oracle's sources."""
    digest = hashlib.sha256()
    files = [KUBEENV / "go.mod", KUBEENV / "go.sum", *sorted((KUBEENV / "cmd" / "oracle").glob("*.go"))]
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def build_oracle() -> Path:
    """The oracle binary for the current sources, built when no binary of their hash exists."""
    target = CACHE / f"oracle-{source_hash()}" / "oracle"
    if target.exists():
        return target
    go = shutil.which("go")
    if go is None:
        raise OracleUnavailable("go is not on PATH: the upstream oracle cannot be built")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    proc = subprocess.run([go, "build", "-o", str(partial), "./cmd/oracle"], cwd=KUBEENV,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"building the oracle failed:\n{proc.stderr[-4000:]}")
    partial.replace(target)  # atomic: a concurrent build never sees half a binary
    return target


def build_oracle_or_skip() -> Path:
    """build_oracle() for a test: without Go the test is skipped with the one line why, except
    under CI=true, where it must run."""
    import pytest  # only tests call this; the benchmarks import the module without pytest

    try:
        return build_oracle()
    except OracleUnavailable as err:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(str(err))


class Oracle:
    """One `oracle serve` process: explain(file, pod) -> the pod's explanation, shaped as
    `kopfsched explain -o json` (plus "topNodes", the nodes sharing the best total)."""

    def __init__(self, binary: Path) -> None:
        self._proc = subprocess.Popen([str(binary), "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      text=True, bufsize=1)

    def explain(self, files: list[str], pod: str) -> dict[str, Any]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps({"files": files, "pod": pod}) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the oracle exited with status {self._proc.wait()}")
        reply: dict[str, Any] = json.loads(line)
        if "error" in reply and "result" not in reply:
            raise RuntimeError(f"oracle: {reply['error']}")
        return reply

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        self._proc.wait(timeout=30)


def run(binary: Path, *files: str) -> dict[str, Any]:
    """`oracle run FILE...`: every pending pod, each applied before the next."""
    proc = subprocess.run([str(binary), "run", *files], capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(proc.stdout)
    return result

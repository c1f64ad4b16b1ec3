"""`kopfsched run` as users run it, in a process of its own, against the real control plane."""
from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

from tests.kubeenv.control_plane import ControlPlane, free_port


class OperatorProcess:
    """One replica: `python -m kopfsched run --kubeconfig K`, its output in `log`."""

    def __init__(self, cluster: ControlPlane, kubeconfig: pathlib.Path, *, name: str = 'kopfsched-0',
                 leader_elect: bool = False, config: pathlib.Path | None = None) -> None:
        self.cluster, self.name = cluster, name
        self.port, self.secure_port = free_port(), free_port()
        self.log = cluster.workdir / f'operator-{name}-{self.port}.log'
        self.argv = [sys.executable, '-m', 'kopfsched', 'run', f'--kubeconfig={kubeconfig}',
                     f'--metrics-port={self.port}', f'--secure-port={self.secure_port}', '--bind-address=127.0.0.1',
                     '--leader-elect' if leader_elect else '--no-leader-elect']
        if config is not None:
            self.argv.append(f'--config={config}')
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> OperatorProcess:
        with open(self.log, 'ab') as out:
            # POD_NAME: the replica's identity in Events and in the Lease, as the Deployment sets it.
            # PYTHONFAULTHANDLER: a stop that times out ends with SIGABRT, which dumps every thread.
            self.process = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            env={**os.environ, 'POD_NAME': self.name, 'PYTHONFAULTHANDLER': '1'},
                                            start_new_session=True)
        return self

    def get(self, path: str, *, timeout: float = 5) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f'http://127.0.0.1:{self.port}{path}', timeout=timeout) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def ready(self) -> bool:
        self.check()
        try:
            return self.get('/readyz')[0] == 200
        except OSError:
            return False

    def wait_ready(self, *, timeout: float = 60) -> OperatorProcess:
        self.cluster.wait_for(self.ready, timeout=timeout, what=f'{self.name} /readyz')
        return self

    def check(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise AssertionError(f'{self.name} exited with {self.process.returncode}:\n{self.last_lines()}')

    def last_lines(self, count: int = 30) -> str:
        return '\n'.join(self.log.read_text(errors='replace').splitlines()[-count:])

    def stop(self, sig: int = signal.SIGTERM, *, timeout: float = 30) -> int:
        """The exit status; SIGKILL when it does not stop within `timeout`."""
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, sig)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGABRT)  # where each thread was, in the log
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
            raise AssertionError(f'{self.name} did not stop within {timeout} s:\n{self.last_lines(80)}') from None


@contextlib.contextmanager
def running_operator(cluster: ControlPlane, kubeconfig: pathlib.Path, **options: object) -> Iterator[OperatorProcess]:
    """A ready replica, stopped with SIGTERM at the end; it must exit 0."""
    replica = OperatorProcess(cluster, kubeconfig, **options).start()  # type: ignore[arg-type]
    try:
        replica.wait_ready()
        yield replica
    except AssertionError as failure:  # what the operator said is the first thing to read
        raise AssertionError(f'{failure}\n{replica.name} said last:\n{replica.last_lines(40)}') from failure
    finally:
        started = time.monotonic()
        code = replica.stop()
        assert code == 0, f'{replica.name} exited with {code} after {time.monotonic() - started:.1f} s:\n' \
                          f'{replica.last_lines()}'

"""A real Kubernetes control plane for the tests and the benchmark scripts: upstream's etcd,
kube-apiserver, kube-controller-manager and kwok (and, when asked, kube-scheduler), each its
own process on free loopback ports, with TLS, RBAC and Node authorization on.

    with ControlPlane(workdir) as cluster:
        cluster.kubectl('apply', '-f', 'crds/')
        cluster.admin_kubeconfig          # system:masters, for the tests' set-up
        cluster.kubeconfig_for_service_account('kopfsched-system', 'kopfsched')

Identities, as in a cluster built by kubeadm: the admin (O=system:masters), the controller
manager (CN=system:kube-controller-manager, each controller with its own ServiceAccount
credentials), the scheduler (CN=system:kube-scheduler), kwok (CN=kwok-controller, bound to
cluster-admin: it stands in for every node's kubelet), and ServiceAccount tokens minted by
the API server's TokenRequest. Every request the API server answers is written to an audit
log (`audit()` reads it): that is how a test sees what the API received.

Start-up waits until `/readyz` is 200 and the `default` ServiceAccount exists (pods cannot be
created before it). A component that exits while the control plane runs is reported by
`check()` with its last log lines. `stop()` ends every process group and waits for them.
`python -m tests.kubeenv.control_plane up` runs one until Ctrl-C and prints its kubeconfig.
"""
from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import os
import pathlib
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import yaml

from tests.kubeenv.build import Binaries, build
from tests.kubeenv.pki import Authority, KeyPair

SERVICE_CIDR = '10.96.0.0/16'
CLUSTER_SERVICE_IP = '10.96.0.1'
ISSUER = 'https://kubernetes.default.svc.cluster.local'
# The controllers the tests need: PV binding, garbage collection, namespace deletion,
# ServiceAccounts and their legacy tokens, orphaned pods, DRA's claims from templates, and
# the protection finalizers' removal (without it a namespace with a claim is never deleted).
CONTROLLERS = ('persistentvolume-binder-controller', 'garbage-collector-controller', 'namespace-controller',
               'serviceaccount-controller', 'serviceaccount-token-controller',
               'pod-garbage-collector-controller', 'resourceclaim-controller',
               'persistentvolumeclaim-protection-controller', 'persistentvolume-protection-controller')
# Every request at Metadata level, once answered: verb, URI, user, status code.
AUDIT_POLICY = {'apiVersion': 'audit.k8s.io/v1', 'kind': 'Policy',
                'omitStages': ['RequestReceived', 'ResponseStarted'],
                'rules': [{'level': 'Metadata'}]}


class ComponentFailed(AssertionError):
    """A component of the control plane exited, or never became ready; the message carries
    its last log lines."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return int(probe.getsockname()[1])


@dataclasses.dataclass(eq=False)  # kept in a set by identity
class Component:
    """One process of the control plane, its output in `log`."""

    name: str
    argv: list[str]
    log: pathlib.Path
    process: subprocess.Popen[bytes] | None = None
    stopping: bool = False

    def start(self) -> None:
        self.stopping = False
        with open(self.log, 'ab') as out:
            # A process group of its own: stop() ends it and whatever it started, and a
            # Ctrl-C in the terminal reaches only the test runner.
            self.process = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        _LIVE.add(self)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def last_lines(self, count: int = 25) -> str:
        try:
            lines = self.log.read_text(errors='replace').splitlines()
        except FileNotFoundError:
            return '(no output)'
        return '\n'.join(lines[-count:])

    def failure(self, what: str) -> ComponentFailed:
        code = self.process.returncode if self.process is not None else None
        return ComponentFailed(f'{self.name} {what} (exit status {code}); its last lines ({self.log}):\n'
                               f'{self.last_lines()}')

    def stop(self, *, timeout: float = 15.0, sig: int = signal.SIGTERM) -> None:
        self.stopping = True
        process = self.process
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=timeout)
        with contextlib.suppress(ProcessLookupError):  # anything it left in its group
            os.killpg(process.pid, signal.SIGKILL)
        _LIVE.discard(self)


_LIVE: set[Component] = set()


@atexit.register
def _kill_leftovers() -> None:
    """A test runner that dies between start and stop leaves no process behind."""
    for component in list(_LIVE):
        component.stop(timeout=5, sig=signal.SIGKILL)


@dataclasses.dataclass(frozen=True)
class Options:
    """What a test may change about the control plane it starts."""

    apiserver_flags: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Extra or overriding kube-apiserver flags, e.g. {'max-requests-inflight': '5'}."""
    controllers: Sequence[str] = CONTROLLERS
    """kube-controller-manager's --controllers; empty: no controller manager."""
    kwok: bool = True
    """kwok's fake kubelets: nodes Ready with a Lease, bound pods Running, deletions completed."""
    kwok_heartbeat: bool = True
    """kwok renews each node's Lease; off for thousands of nodes that no controller watches."""
    audit: bool = True
    """Write the audit log (`audit()`); off for scale runs, where it would be gigabytes."""


class ControlPlane:
    """etcd, kube-apiserver, kube-controller-manager and kwok in `workdir` (see the module)."""

    def __init__(self, workdir: pathlib.Path, *, options: Options | None = None,
                 binaries: Binaries | None = None) -> None:
        self.workdir = workdir
        self.options = options or Options()
        self.binaries = binaries or build()
        self.components: dict[str, Component] = {}
        self.apiserver_port = free_port()
        self.url = f'https://127.0.0.1:{self.apiserver_port}'
        self.etcd_url = f'https://127.0.0.1:{free_port()}'
        self.audit_log = workdir / 'audit.log'
        self._audit_offset = 0
        self._audit_entries: list[dict[str, Any]] = []
        workdir.mkdir(parents=True, exist_ok=True)
        self.pki = Authority(workdir / 'pki')
        self.ca_file = self.pki.cert
        self.admin = self.pki.issue('admin', common_name='kubeenv-admin', organizations=('system:masters',))
        self.admin_kubeconfig = self.write_kubeconfig('admin', certificate=self.admin)
        self._admin_context = ssl.create_default_context(cafile=str(self.ca_file))
        self._admin_context.load_cert_chain(str(self.admin.cert), str(self.admin.key))

    # -- life cycle --------------------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> None:
        self._start_etcd()
        self._start_apiserver()
        self.wait_ready()
        self._bootstrap_rbac()
        if self.options.controllers:
            self._start_controller_manager()
        if self.options.kwok:
            self._start_kwok()
        if 'serviceaccount-controller' in self.options.controllers:
            self.wait_for(lambda: self.get('/api/v1/namespaces/default/serviceaccounts/default'),
                          timeout=60, what='the default ServiceAccount (kube-controller-manager)')

    def stop(self) -> None:
        for component in reversed(list(self.components.values())):
            component.stop()

    def check(self) -> None:
        """Raise ComponentFailed for a component that exited while it should run."""
        for component in self.components.values():
            if not component.stopping and not component.alive():
                raise component.failure('exited')

    def kill(self, name: str) -> None:
        """SIGKILL one component (a crash, as a test provokes it); `restart` brings it back."""
        self.components[name].stop(sig=signal.SIGKILL)

    def restart(self, name: str) -> None:
        component = self.components[name]
        component.stop()
        component.start()
        if name == 'kube-apiserver':
            self.wait_ready()

    def _run(self, name: str, argv: list[str]) -> Component:
        component = Component(name=name, argv=argv, log=self.workdir / f'{name}.log')
        self.components[name] = component
        component.start()
        return component

    # -- components --------------------------------------------------------------------------

    def _start_etcd(self) -> None:
        serving = self.pki.issue('etcd', common_name='etcd', hosts=('127.0.0.1', 'localhost'), server=True)
        self.etcd_client = self.pki.issue('etcd-client', common_name='kube-apiserver-etcd-client')
        peer = f'http://127.0.0.1:{free_port()}'
        self._run('etcd', [str(self.binaries.kubeenv), 'etcd', '--name=kubeenv',
                           f'--data-dir={self.workdir / "etcd"}',
                           f'--listen-client-urls={self.etcd_url}', f'--advertise-client-urls={self.etcd_url}',
                           f'--listen-peer-urls={peer}', f'--initial-advertise-peer-urls={peer}',
                           f'--initial-cluster=kubeenv={peer}',
                           f'--cert-file={serving.cert}', f'--key-file={serving.key}',
                           f'--trusted-ca-file={self.ca_file}', '--client-cert-auth',
                           '--unsafe-no-fsync', '--log-level=warn', '--quota-backend-bytes=8589934592'])

    def _start_apiserver(self) -> None:
        serving = self.pki.issue('kube-apiserver', common_name='kube-apiserver', server=True, client=False,
                                 hosts=('127.0.0.1', 'localhost', CLUSTER_SERVICE_IP, 'kubernetes',
                                        'kubernetes.default', 'kubernetes.default.svc',
                                        'kubernetes.default.svc.cluster.local'))
        self.service_account_key = self.pki.signing_key('service-account')
        flags = {
            'etcd-servers': self.etcd_url, 'etcd-cafile': str(self.ca_file),
            'etcd-certfile': str(self.etcd_client.cert), 'etcd-keyfile': str(self.etcd_client.key),
            'bind-address': '127.0.0.1', 'advertise-address': '127.0.0.1', 'secure-port': str(self.apiserver_port),
            # Endpoints validation refuses a loopback address for the kubernetes Service.
            'endpoint-reconciler-type': 'none',
            'tls-cert-file': str(serving.cert), 'tls-private-key-file': str(serving.key),
            'client-ca-file': str(self.ca_file),
            'authorization-mode': 'Node,RBAC',
            'service-account-issuer': ISSUER, 'service-account-key-file': str(self.service_account_key.cert),
            'service-account-signing-key-file': str(self.service_account_key.key),
            'service-cluster-ip-range': SERVICE_CIDR,
            'allow-privileged': 'true',
            # No node-lifecycle controller runs to lift the not-ready taint this plugin puts
            # on every new node; kwok marks nodes Ready at once instead.
            'disable-admission-plugins': 'TaintNodesByCondition',
            'profiling': 'false',
        }
        if self.options.audit:
            policy = self.workdir / 'audit-policy.yaml'
            policy.write_text(yaml.safe_dump(AUDIT_POLICY))
            flags.update({'audit-policy-file': str(policy), 'audit-log-path': str(self.audit_log),
                          'audit-log-format': 'json', 'audit-log-maxsize': '0'})
        flags.update(self.options.apiserver_flags)
        self._run('kube-apiserver', [str(self.binaries.kubeenv), 'kube-apiserver',
                                     *(f'--{k}={v}' for k, v in flags.items())])

    def _bootstrap_rbac(self) -> None:
        # kwok acts for every node's kubelet; the Node authorizer knows only system:node:<name>
        # users, so kwok gets its own identity and cluster-admin.
        self.post('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
            'apiVersion': 'rbac.authorization.k8s.io/v1', 'kind': 'ClusterRoleBinding',
            'metadata': {'name': 'kubeenv:kwok-controller'},
            'roleRef': {'apiGroup': 'rbac.authorization.k8s.io', 'kind': 'ClusterRole', 'name': 'cluster-admin'},
            'subjects': [{'apiGroup': 'rbac.authorization.k8s.io', 'kind': 'User', 'name': 'kwok-controller'}]})

    def _start_controller_manager(self) -> None:
        identity = self.pki.issue('kube-controller-manager', common_name='system:kube-controller-manager')
        kubeconfig = self.write_kubeconfig('kube-controller-manager', certificate=identity)
        self._run('kube-controller-manager', [
            str(self.binaries.kubeenv), 'kube-controller-manager',
            f'--kubeconfig={kubeconfig}', f'--controllers={",".join(self.options.controllers)}',
            '--use-service-account-credentials=true',
            f'--service-account-private-key-file={self.service_account_key.key}',
            f'--root-ca-file={self.ca_file}', '--leader-elect=false',
            '--bind-address=127.0.0.1', '--secure-port=0',
            # Its informers must not lag a test that waits on them.
            '--kube-api-qps=500', '--kube-api-burst=1000'])

    def _start_kwok(self) -> None:
        identity = self.pki.issue('kwok', common_name='kwok-controller')
        kubeconfig = self.write_kubeconfig('kwok', certificate=identity)
        stages = subprocess.run([str(self.binaries.kwok), 'stages'], capture_output=True, text=True, check=True)
        documents = [d for d in yaml.safe_load_all(stages.stdout) if d]
        if not self.options.kwok_heartbeat:
            documents = [d for d in documents if 'heartbeat' not in d['metadata']['name']]
        config = self.workdir / 'kwok-stages.yaml'
        config.write_text(yaml.safe_dump_all(documents))
        self._run('kwok', [str(self.binaries.kwok), f'--kubeconfig={kubeconfig}', f'--config={config}',
                           '--manage-all-nodes=true', '--cidr=10.244.0.0/16', '--node-ip=127.0.0.1',
                           '--node-lease-duration-seconds=40'])

    def start_scheduler(self, config: Mapping[str, Any] | None = None, *, name: str = 'kube-scheduler') -> Component:
        """The real kube-scheduler of the pinned release, as system:kube-scheduler; `config` is a
        KubeSchedulerConfiguration (its clientConnection.kubeconfig is filled in)."""
        identity = self.pki.issue(name, common_name='system:kube-scheduler')
        kubeconfig = self.write_kubeconfig(name, certificate=identity)
        body = {'apiVersion': 'kubescheduler.config.k8s.io/v1', 'kind': 'KubeSchedulerConfiguration',
                'leaderElection': {'leaderElect': False}, **(config or {})}
        body['clientConnection'] = {'qps': 50, 'burst': 100, **body.get('clientConnection', {}),
                                    'kubeconfig': str(kubeconfig)}
        path = self.workdir / f'{name}-config.yaml'
        path.write_text(yaml.safe_dump(body))
        return self._run(name, [str(self.binaries.kubeenv), 'kube-scheduler', f'--config={path}',
                                '--bind-address=127.0.0.1', '--secure-port=0'])

    # -- clients -----------------------------------------------------------------------------

    def write_kubeconfig(self, name: str, *, certificate: KeyPair | None = None,
                         token: str | None = None) -> pathlib.Path:
        user: dict[str, str] = {}
        if certificate is not None:
            user = {'client-certificate': str(certificate.cert), 'client-key': str(certificate.key)}
        if token is not None:
            user = {'token': token}
        path = self.workdir / f'{name}.kubeconfig'
        path.write_text(yaml.safe_dump({
            'apiVersion': 'v1', 'kind': 'Config', 'current-context': name,
            'clusters': [{'name': 'kubeenv',
                          'cluster': {'server': self.url, 'certificate-authority': str(self.ca_file)}}],
            'users': [{'name': name, 'user': user}],
            'contexts': [{'name': name, 'context': {'cluster': 'kubeenv', 'user': name}}]}))
        path.chmod(0o600)
        return path

    def kubectl(self, *args: str, kubeconfig: pathlib.Path | None = None, input: str | None = None,
                timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """kubectl of the pinned release (the kubeenv binary's), as the admin unless told."""
        config = kubeconfig or self.admin_kubeconfig
        return subprocess.run([str(self.binaries.kubeenv), 'kubectl', f'--kubeconfig={config}', *args],
                              capture_output=True, text=True, timeout=timeout, input=input, check=False,
                              env={**os.environ, 'KUBECACHEDIR': str(self.workdir / 'kube-cache')})

    def request(self, method: str, path: str, body: Any = None, *, content_type: str = 'application/json',
                timeout: float = 30) -> tuple[int, Any]:
        """One request as the admin: (status, decoded JSON body)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={'Content-Type': content_type, 'Accept': 'application/json'})
        try:
            with urllib.request.urlopen(request, context=self._admin_context, timeout=timeout) as response:
                status, payload = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, payload = error.code, error.read()
        try:
            return status, json.loads(payload) if payload else None
        except json.JSONDecodeError:
            return status, payload.decode(errors='replace')

    def get(self, path: str) -> Any:
        """The object at `path`, or None when the API answers 404."""
        status, payload = self.request('GET', path)
        if status == 404:
            return None
        if status != 200:
            raise AssertionError(f'GET {path}: {status} {payload}')
        return payload

    def post(self, path: str, body: Any) -> Any:
        status, payload = self.request('POST', path, body)
        if status not in (200, 201):
            raise AssertionError(f'POST {path}: {status} {payload}')
        return payload

    def patch(self, path: str, body: Any, *, content_type: str = 'application/merge-patch+json') -> Any:
        status, payload = self.request('PATCH', path, body, content_type=content_type)
        if status != 200:
            raise AssertionError(f'PATCH {path}: {status} {payload}')
        return payload

    def delete(self, path: str, body: Any = None) -> int:
        status, _ = self.request('DELETE', path, body)
        return status

    def service_account_token(self, namespace: str, name: str, *, seconds: int = 3600,
                              audiences: Sequence[str] = ()) -> str:
        """A bound token for the ServiceAccount (TokenRequest, as the kubelet asks for a pod's)."""
        spec: dict[str, Any] = {'expirationSeconds': seconds}
        if audiences:
            spec['audiences'] = list(audiences)
        answer = self.post(f'/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token',
                           {'apiVersion': 'authentication.k8s.io/v1', 'kind': 'TokenRequest', 'spec': spec})
        return str(answer['status']['token'])

    def kubeconfig_for_service_account(self, namespace: str, name: str) -> pathlib.Path:
        return self.write_kubeconfig(f'sa-{namespace}-{name}', token=self.service_account_token(namespace, name))

    def kubeconfig_for_user(self, name: str, *, groups: tuple[str, ...] = ()) -> pathlib.Path:
        """A client certificate for user `name` in `groups` (no RBAC of its own)."""
        return self.write_kubeconfig(f'user-{name}', certificate=self.pki.issue(
            f'user-{name}', common_name=name, organizations=groups))

    # -- waiting and reading -----------------------------------------------------------------

    def wait_ready(self, *, timeout: float = 90) -> None:
        """Until the API server's /readyz answers 200; a component exiting meanwhile fails at once."""
        def ready() -> bool:
            self.check()
            try:
                return self.request('GET', '/readyz', timeout=5)[0] == 200
            except (OSError, urllib.error.URLError):
                return False
        self.wait_for(ready, timeout=timeout, what='kube-apiserver /readyz')

    def wait_for(self, probe: Any, *, timeout: float, what: str, interval: float = 0.1) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            self.check()
            result = probe()
            if result:
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f'timed out after {timeout:g} s waiting for {what}; '
                                     f'kube-apiserver said last:\n{self.components["kube-apiserver"].last_lines(8)}')
            time.sleep(interval)

    def audit(self, *, user: str | None = None, verb: str | None = None, resource: str | None = None,
              subresource: str | None = None, namespace: str | None = None,
              name: str | None = None) -> list[dict[str, Any]]:
        """The audit events so far (every request answered) that match all the given fields."""
        if not self.options.audit:
            raise AssertionError('this control plane writes no audit log (Options(audit=False))')
        if self.audit_log.exists():
            with open(self.audit_log, 'rb') as log:
                log.seek(self._audit_offset)
                chunk = log.read()
            complete = chunk[:chunk.rfind(b'\n') + 1]
            self._audit_offset += len(complete)
            self._audit_entries.extend(json.loads(line) for line in complete.splitlines() if line.strip())
        wanted = {'resource': resource, 'subresource': subresource, 'namespace': namespace, 'name': name}
        return [entry for entry in self._audit_entries
                if (user is None or entry['user']['username'] == user)
                and (verb is None or entry['verb'] == verb)
                and all(value is None or (entry.get('objectRef') or {}).get(key) == value
                        for key, value in wanted.items())]

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision (as the API server does every
        --etcd-compaction-interval); the revision. A watch resumed from before it gets 410 Gone."""
        context = ssl.create_default_context(cafile=str(self.ca_file))
        context.load_cert_chain(str(self.etcd_client.cert), str(self.etcd_client.key))

        def call(path: str, body: dict[str, Any]) -> dict[str, Any]:
            request = urllib.request.Request(self.etcd_url + path, data=json.dumps(body).encode(), method='POST',
                                             headers={'Content-Type': 'application/json'})
            with urllib.request.urlopen(request, context=context, timeout=30) as response:
                return dict(json.loads(response.read()))
        revision = int(call('/v3/kv/range', {'key': 'Lw=='})['header']['revision'])  # key "/"
        call('/v3/kv/compaction', {'revision': revision, 'physical': True})
        return revision

    def versions(self) -> dict[str, str]:
        """The module versions the kubeenv binary was built from (k8s.io/kubernetes, etcd)."""
        out = subprocess.run([str(self.binaries.kubeenv), 'version'], capture_output=True, text=True, check=True)
        return dict(line.split(' ', 1) for line in out.stdout.splitlines() if ' ' in line)


@contextlib.contextmanager
def running(options: Options | None = None) -> Iterator[ControlPlane]:
    """A control plane in a temporary directory, stopped and removed at the end."""
    with tempfile.TemporaryDirectory(prefix='kubeenv-') as workdir, \
            ControlPlane(pathlib.Path(workdir), options=options) as cluster:
        yield cluster


def main(argv: Sequence[str] = sys.argv[1:]) -> int:
    if list(argv) != ['up']:
        print('usage: python -m tests.kubeenv.control_plane up', file=sys.stderr)
        return 2
    started = time.monotonic()
    with running() as cluster:
        print(f'kubeenv: ready in {time.monotonic() - started:.1f} s; versions {cluster.versions()}', file=sys.stderr)
        print(f'export KUBECONFIG={cluster.admin_kubeconfig}', flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                cluster.check()
                time.sleep(1)
    return 0


if __name__ == '__main__':
    sys.exit(main())

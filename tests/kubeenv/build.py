"""Building the test control plane's two programs from tests/kubeenv's Go modules, once per
content hash, outside git.

`kubeenv` (this folder's module: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kubectl of the k8s.io/kubernetes release go.mod pins) and `kwok` (kwok/,
a module of its own: kwok requires other k8s.io versions) are built into
``$KOPFSCHED_KUBEENV_CACHE`` (default ``~/.cache/kopfsched/kubeenv``) under a folder named
by the hash of their sources and the Go version, so a changed go.mod or main.go builds anew
and an unchanged one is found at once. Concurrent builders wait on one lock file.
"""
from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

MODULE = pathlib.Path(__file__).parent
KWOK_MODULE = MODULE / 'kwok'
ORACLE = MODULE / 'cmd' / 'oracle'
GO_INSTALL_HINT = 'install Go 1.26 or newer (Debian: apt-get install golang-go; or go.dev/dl) and put `go` on PATH'


class BuildError(RuntimeError):
    """`go build` failed; the message ends with its last output lines."""


@dataclasses.dataclass(frozen=True)
class Binaries:
    kubeenv: pathlib.Path
    kwok: pathlib.Path
    seconds: float = 0.0
    """How long this call took to build them (0 when they were already built)."""


def cache_root() -> pathlib.Path:
    default = pathlib.Path.home() / '.cache' / 'kopfsched' / 'kubeenv'
    return pathlib.Path(os.environ.get('KOPFSCHED_KUBEENV_CACHE') or default)


def go_command() -> str | None:
    """`go` on PATH, else where the official tarball and Debian's golang-go put it."""
    found = shutil.which('go')
    if found:
        return found
    return next((str(p) for p in (pathlib.Path('/usr/local/go/bin/go'), pathlib.Path('/usr/lib/go/bin/go'))
                 if p.exists()), None)


def source_hash(go: str) -> str:
    """The Go version, the build's flags and every go.mod, go.sum and .go file under tests/kubeenv
    but the oracle's (tests/differential builds that program, under a hash of its own)."""
    digest = hashlib.sha256()
    version = subprocess.run([go, 'version'], capture_output=True, text=True, check=True).stdout
    digest.update(version.encode())
    digest.update(' '.join(go_build_flags(MODULE)).encode() + b'\0' + ' '.join(go_build_flags(KWOK_MODULE)).encode())
    sources = [p for p in MODULE.rglob('*') if (p.name in ('go.mod', 'go.sum') or p.suffix == '.go')
               and ORACLE not in p.parents]
    for path in sorted(sources):
        digest.update(str(path.relative_to(MODULE)).encode() + b'\0' + path.read_bytes() + b'\0')
    return digest.hexdigest()[:16]


def build(*, progress: bool = True) -> Binaries:
    """The built programs, building them first if this content hash has none yet."""
    go = go_command()
    if go is None:
        raise BuildError(f'Go is not installed: {GO_INSTALL_HINT}')
    target = cache_root() / source_hash(go)
    binaries = Binaries(kubeenv=target / 'kubeenv', kwok=target / 'kwok')
    if binaries.kubeenv.exists() and binaries.kwok.exists():
        return binaries
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / '.lock', 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building the same hash
        if binaries.kubeenv.exists() and binaries.kwok.exists():
            return binaries
        started = time.monotonic()
        target.mkdir(parents=True, exist_ok=True)
        for module, package, output in ((MODULE, './cmd/kubeenv', binaries.kubeenv),
                                        (KWOK_MODULE, './cmd/kwok', binaries.kwok)):
            if progress:
                print(f'kubeenv: building {output.name} from {module} (once per source hash) ...',
                      file=sys.stderr, flush=True)
            _go_build(go, module, package, output)
        seconds = time.monotonic() - started
        if progress:  # the cold build's cost, in CI's log
            print(f'kubeenv: built in {seconds:.0f} s', file=sys.stderr, flush=True)
        return dataclasses.replace(binaries, seconds=seconds)


def kubernetes_version(module: pathlib.Path = MODULE) -> str:
    """The k8s.io/kubernetes version the module's go.mod requires, e.g. v1.37.2."""
    found = re.search(r'^\s*(?:require\s+)?k8s\.io/kubernetes (v\d+\.\d+\.\d+\S*)$',
                      (module / 'go.mod').read_text(), re.M)
    if not found:
        raise BuildError(f'{module / "go.mod"} requires no k8s.io/kubernetes version')
    return found.group(1)


def version_ldflags(version: str) -> str:
    """What upstream's hack/lib/version.sh stamps into its binaries: without it the API server
    reports v0.0.0-master as its /version and kubectl as its client version."""
    major, minor = version.lstrip('v').split('.')[:2]
    stamps = {'gitVersion': version, 'gitMajor': major, 'gitMinor': minor, 'gitTreeState': 'clean'}
    return ' '.join(f'-X {package}.{key}={value}' for package in ('k8s.io/component-base/version',
                                                                   'k8s.io/client-go/pkg/version')
                    for key, value in stamps.items())


def go_build_flags(module: pathlib.Path) -> list[str]:
    """`go build`'s flags for a module (part of the source hash: other flags, other binaries)."""
    ldflags = '-s -w' + (f' {version_ldflags(kubernetes_version())}' if module == MODULE else '')
    # -mod=readonly: go.sum is committed and complete; a build never edits the checkout.
    # Build flags that change compilation (-trimpath, -race) would rebuild everything: only
    # the linker's flags differ from a plain `go build`.
    return ['-mod=readonly', f'-ldflags={ldflags}']


def _go_build(go: str, module: pathlib.Path, package: str, output: pathlib.Path) -> None:
    partial = output.with_suffix('.partial')
    command = [go, 'build', *go_build_flags(module), '-o', str(partial), package]
    done = subprocess.run(command, cwd=module, capture_output=True, text=True, check=False,
                          env={**os.environ, 'GOFLAGS': '-buildvcs=false'})
    if done.returncode != 0:
        tail = '\n'.join((done.stdout + done.stderr).strip().splitlines()[-30:])
        raise BuildError(f'`{" ".join(command)}` in {module} failed ({done.returncode}):\n{tail}')
    partial.replace(output)


def main() -> int:
    """`python -m tests.kubeenv.build`: build (or find) the programs and print their paths."""
    try:
        binaries = build()
    except BuildError as error:
        print(f'kubeenv: {error}', file=sys.stderr)
        return 1
    print(binaries.kubeenv)
    print(binaries.kwok)
    return 0


if __name__ == '__main__':
    sys.exit(main())

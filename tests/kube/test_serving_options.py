"""`kopfsched run`'s secure-serving flags: usage errors exit 2, an unusable certificate or a
taken port exit 1 with one line, before anything is watched; the defaults are upstream's."""
from __future__ import annotations

import pathlib
import socket

import pytest

from kopfsched.cli import main
from kopfsched.kube.main import options_from, run_operator
from kopfsched.observability.secure import self_signed

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


@pytest.fixture
def kubeconfig(tmp_path: pathlib.Path) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    return str(path)


def run(capsys: pytest.CaptureFixture[str], kubeconfig: str, **serving: object) -> tuple[int, str]:
    code = run_operator(kubeconfig=kubeconfig, config_file=None, leader_elect=False, metrics_port=None,
                        serving=serving)
    return code, capsys.readouterr().err


def test_a_missing_certificate_exits_1_naming_it(tmp_path, kubeconfig, capsys):
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    assert run(capsys, kubeconfig, secure_port=0, tls_cert_file=str(cert), tls_private_key_file=str(key)) == (
        1, f"kopfsched run: {cert}: No such file or directory\n")


def test_a_key_that_does_not_match_exits_1(tmp_path, kubeconfig, capsys):
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(self_signed(["a"])[0])
    key.write_bytes(self_signed(["b"])[1])
    code, err = run(capsys, kubeconfig, secure_port=0, tls_cert_file=str(cert), tls_private_key_file=str(key))
    assert (code, err.count("\n")) == (1, 1)
    assert err.startswith(f"kopfsched run: {cert} and {key}: not a matching PEM certificate and key (")


def test_a_taken_secure_port_exits_1_naming_the_flag(kubeconfig, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, err = run(capsys, kubeconfig, secure_port=port, bind_address="127.0.0.1")
    assert (code, err) == (1, f"kopfsched run: --secure-port {port}: error while attempting to bind on address "
                              f"('127.0.0.1', {port}): address already in use\n")


@pytest.mark.parametrize(("flags", "message"), [
    (["--bind-address", "localhost"], "argument --bind-address: must be an IP address, got 'localhost'"),
    (["--authorization-always-allow-paths", "/a*/b"],
     "argument --authorization-always-allow-paths: only trailing * allowed in '/a*/b'"),
    (["--secure-port", "70000"], "argument --secure-port: must be a port number (0-65535), got 70000"),
])
def test_bad_serving_flags_are_usage_errors(capsys, flags, message):
    with pytest.raises(SystemExit) as exit_:
        main(["run", *flags])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"kopfsched run: error: {message}"


def test_the_defaults_are_kube_schedulers(monkeypatch):
    seen = {}
    monkeypatch.setattr("kopfsched.kube.main.run_operator", lambda **kwargs: seen.update(kwargs) or 0)
    assert main(["run"]) == 0
    assert seen["metrics_port"] == 10251
    assert seen["serving"] == {"secure_port": 10259, "bind_address": "0.0.0.0", "tls_cert_file": None,
                               "tls_private_key_file": None, "cert_dir": None,
                               "always_allow_paths": ("/healthz", "/readyz", "/livez")}
    options = options_from(kubeconfig=None, config_file=None, leader_elect=False, metrics_port=10251,
                           serving=seen["serving"])
    assert (options.secure_port, options.bind_address, options.metrics_host) == (10259, "0.0.0.0", "127.0.0.1")

"""The client TLS settings of every HTTPS connection the scheduler opens (to the API server, to
HTTP extenders), read as client-go's TLSConfigFor reads a rest.Config: with a CA given (file or
PEM data) only that CA is trusted, else the system's; `verify=False` (insecure) checks neither
the chain nor the host name; a client certificate comes from files or from PEM data."""

from __future__ import annotations

import ssl
import tempfile
from pathlib import Path


def client_context(*, ca_file: str | None = None, ca_data: bytes | None = None, cert_file: str | None = None,
                   key_file: str | None = None, cert_data: bytes | None = None, key_data: bytes | None = None,
                   verify: bool = True, strict: bool = True) -> ssl.SSLContext:
    """An SSLContext for a client. `strict=False` clears VERIFY_X509_STRICT (Python 3.13 sets it;
    Go's verifier does not check what it adds, so some cluster CAs fail it)."""
    if ca_file or ca_data:
        context = ssl.create_default_context(cafile=ca_file or None, cadata=ca_data.decode() if ca_data else None)
    else:
        context = ssl.create_default_context()
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if not strict:
        context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    if cert_data or key_data:
        _load_cert_data(context, cert_data or Path(cert_file or "").read_bytes(),
                        key_data or (Path(key_file).read_bytes() if key_file else b""))
    elif cert_file:
        context.load_cert_chain(cert_file, key_file or None)
    return context


def _load_cert_data(context: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """ssl loads certificates only from files: inline data goes through a private temp dir."""
    with tempfile.TemporaryDirectory() as tmp:
        cert, key = Path(tmp, "cert.pem"), Path(tmp, "key.pem")
        cert.write_bytes(cert_pem)
        key.write_bytes(key_pem)
        context.load_cert_chain(cert, key if key_pem else None)

"""The test control plane's certificates: one CA, serving certificates for etcd and the
kube-apiserver, a client certificate per identity, and the service-account signing key.

ECDSA P-256 throughout: the API server, etcd and Python's ssl all accept it, and a key
takes a millisecond to make where RSA takes tens.
"""
from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import pathlib

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=7)


@dataclasses.dataclass(frozen=True)
class KeyPair:
    cert: pathlib.Path
    key: pathlib.Path


def _write_key(key: ec.EllipticCurvePrivateKey, path: pathlib.Path) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)


class Authority:
    """A CA in `directory` (ca.crt, ca.key) that issues certificates beside itself."""

    def __init__(self, directory: pathlib.Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, 'kopfsched-kubeenv-ca')])
        now = datetime.datetime.now(datetime.UTC)
        self._cert = (x509.CertificateBuilder()
                      .subject_name(name).issuer_name(name)
                      .public_key(self._key.public_key())
                      .serial_number(x509.random_serial_number())
                      .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + VALIDITY)
                      .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                      .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                   content_commitment=False, key_encipherment=False,
                                                   data_encipherment=False, key_agreement=False,
                                                   encipher_only=False, decipher_only=False), critical=True)
                      .sign(self._key, hashes.SHA256()))
        self.cert = directory / 'ca.crt'
        self.cert.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))
        _write_key(self._key, directory / 'ca.key')

    def issue(self, name: str, *, common_name: str, organizations: tuple[str, ...] = (),
              hosts: tuple[str, ...] = (), client: bool = True, server: bool = False) -> KeyPair:
        """A certificate `name`.crt / `name`.key for CN=`common_name`, O=each organization (the
        API server reads them as the user and its groups); `hosts` are its DNS and IP SANs."""
        key = ec.generate_private_key(ec.SECP256R1())
        subject = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
        subject.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
        usages = ([ExtendedKeyUsageOID.CLIENT_AUTH] if client else []) + (
            [ExtendedKeyUsageOID.SERVER_AUTH] if server else [])
        now = datetime.datetime.now(datetime.UTC)
        builder = (x509.CertificateBuilder()
                   .subject_name(x509.Name(subject)).issuer_name(self._cert.subject)
                   .public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + VALIDITY)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage(usages), critical=False))
        if hosts:
            builder = builder.add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
        pair = KeyPair(cert=self.directory / f'{name}.crt', key=self.directory / f'{name}.key')
        pair.cert.write_bytes(builder.sign(self._key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM))
        _write_key(key, pair.key)
        return pair

    def signing_key(self, name: str) -> KeyPair:
        """A bare key pair (`name`.key, `name`.pub): the service-account token signing key."""
        key = ec.generate_private_key(ec.SECP256R1())
        pair = KeyPair(cert=self.directory / f'{name}.pub', key=self.directory / f'{name}.key')
        pair.cert.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                            serialization.PublicFormat.SubjectPublicKeyInfo))
        _write_key(key, pair.key)
        return pair


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)

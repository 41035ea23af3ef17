"""Certificates and kubeconfigs for the control plane: a CA (ECDSA P-256), serving and
client certificates, the service-account signing key.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


@dataclass
class Pki:
    """A CA and the certificates the control plane needs, written to `directory`."""

    directory: Path
    ca_key: ec.EllipticCurvePrivateKey = field(default_factory=_key)

    def __post_init__(self) -> None:
        now = datetime.datetime.now(datetime.UTC)
        self._now = now
        self.ca_cert = (
            x509.CertificateBuilder()
            .subject_name(_name("llmkube-test-ca"))
            .issuer_name(_name("llmkube-test-ca"))
            .public_key(self.ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=7))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self.ca_key, hashes.SHA256())
        )
        self.ca = self.directory / "ca.crt"
        self.ca.write_bytes(self.ca_cert.public_bytes(serialization.Encoding.PEM))

    def issue(
        self,
        name: str,
        cn: str,
        *,
        org: str | None = None,
        server: bool = False,
        ips: tuple[str, ...] = (),
        dns: tuple[str, ...] = (),
    ) -> tuple[Path, Path]:
        """A key and certificate signed by the CA; a serving one names loopback, the
        `kubernetes` Service's DNS names, `ips` (the node's address, the Service IP) and
        `dns` (a webhook Service's names)."""
        key = _key()
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn, org))
            .issuer_name(self.ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(self._now - datetime.timedelta(hours=1))
            .not_valid_after(self._now + datetime.timedelta(days=7))
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                        *(x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips),
                        x509.DNSName("localhost"),
                        x509.DNSName("kubernetes"),
                        x509.DNSName("kubernetes.default"),
                        x509.DNSName("kubernetes.default.svc"),
                        *(x509.DNSName(name) for name in dns),
                    ]
                ),
                critical=False,
            )
        cert = builder.sign(self.ca_key, hashes.SHA256())
        crt, pem = self.directory / f"{name}.crt", self.directory / f"{name}.key"
        crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        pem.write_bytes(_key_pem(key))
        pem.chmod(0o600)
        return crt, pem

    def signing_key(self) -> tuple[Path, Path]:
        """The service-account token signing key (private) and its public half."""
        key = _key()
        private, public = self.directory / "sa.key", self.directory / "sa.pub"
        private.write_bytes(_key_pem(key))
        private.chmod(0o600)
        public.write_bytes(
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        return private, public


def kubeconfig(
    path: Path,
    server: str,
    ca: Path,
    *,
    user: str,
    cert: Path | None = None,
    key: Path | None = None,
    token: str | None = None,
    namespace: str | None = None,
) -> Path:
    credentials: dict[str, Any] = {}
    if cert is not None and key is not None:
        credentials = {"client-certificate": str(cert), "client-key": str(key)}
    if token is not None:
        credentials = {"token": token}
    context: dict[str, Any] = {"cluster": "llmkube-test", "user": user}
    if namespace:
        context["namespace"] = namespace
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "llmkube-test",
                "cluster": {
                    "server": server,
                    "certificate-authority-data": base64.b64encode(ca.read_bytes()).decode(),
                },
            }
        ],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": user, "context": context}],
        "current-context": user,
    }
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)
    return path

"""Certificates for trying TLS out: a private CA, a broker certificate for
the given host names and addresses, and client certificates (their CN is the
role the tls provider authenticates).

For development and tests only: the CA's key is written next to its
certificate so more can be issued, and nothing is protected by a password.
Keys are EC P-256. Failure modes: an unwritable directory raises OSError; a
directory that already holds these files is refused (FileExistsError) so a
working CA is never replaced by accident.
"""
from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass
class TestCertificates:
    ca: Path
    ca_key: Path
    broker_cert: Path
    broker_key: Path
    #: (certificate, key) per client role.
    clients: dict[str, tuple[Path, Path]] = field(default_factory=dict)


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write(path: Path, data: bytes, secret: bool = False) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if secret else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _key_pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _alt_names(hosts: list[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def create_test_certificates(directory: Path, hosts: list[str], clients: list[str],
                             days: int = 365) -> TestCertificates:
    """Write ``ca``, ``broker`` and ``<client>`` ``.cert.pem`` / ``.key.pem`` files into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    names = ["ca", "broker", *clients]
    taken = [p for n in names for p in (directory / f"{n}.cert.pem", directory / f"{n}.key.pem") if p.exists()]
    if taken:
        raise FileExistsError(f"{taken[0]} exists: choose another directory or remove the old files")
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (x509.CertificateBuilder().subject_name(_name("Magnetar test CA")).issuer_name(_name("Magnetar test CA"))
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(start).not_valid_after(end)
               .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                            content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_agreement=False, encipher_only=False,
                                            decipher_only=False), critical=True)
               .sign(ca_key, hashes.SHA256()))

    def issue(name: str, cn: str, usage, alt: list[str]) -> tuple[Path, Path]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(ca_cert.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(start).not_valid_after(end)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
        if alt:
            builder = builder.add_extension(_alt_names(alt), critical=False)
        cert_file, key_file = directory / f"{name}.cert.pem", directory / f"{name}.key.pem"
        _write(key_file, _key_pem(key), secret=True)
        _write(cert_file, _cert_pem(builder.sign(ca_key, hashes.SHA256())))
        return cert_file, key_file

    _write(directory / "ca.key.pem", _key_pem(ca_key), secret=True)
    _write(directory / "ca.cert.pem", _cert_pem(ca_cert))
    broker_cert, broker_key = issue("broker", hosts[0], ExtendedKeyUsageOID.SERVER_AUTH, hosts)
    issued = {role: issue(role, role, ExtendedKeyUsageOID.CLIENT_AUTH, []) for role in clients}
    return TestCertificates(directory / "ca.cert.pem", directory / "ca.key.pem", broker_cert, broker_key, issued)

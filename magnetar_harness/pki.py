"""Certificates for test brokers, made with ``cryptography``: a CA, server and client certificates.

``make_pki(dir)`` writes PEM files and returns their paths. Keys are EC P-256
(fast to generate); certificates are valid for a day.
"""
from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write_key(key, path: Path) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))


@dataclass
class Authority:
    key: object
    cert: x509.Certificate
    cert_file: Path

    def issue(self, directory: Path, name: str, cn: str, *, server: bool, hosts: tuple[str, ...] = ()) -> tuple[Path, Path]:
        """(certificate file, key file) of a new leaf certificate for ``cn``."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        builder = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(self.cert.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server
                                                         else ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
        if hosts:
            names = []
            for h in hosts:
                try:
                    names.append(x509.IPAddress(ipaddress.ip_address(h)))
                except ValueError:
                    names.append(x509.DNSName(h))
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        cert_file, key_file = directory / f"{name}.cert.pem", directory / f"{name}.key.pem"
        cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(key, key_file)
        return cert_file, key_file


def authority(directory: Path, name: str = "ca") -> Authority:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(_name(f"{name} test CA")).issuer_name(_name(f"{name} test CA"))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False),
                           critical=True)
            .sign(key, hashes.SHA256()))
    directory.mkdir(parents=True, exist_ok=True)
    cert_file = directory / f"{name}.cert.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return Authority(key, cert, cert_file)


@dataclass
class Pki:
    ca: Path
    other_ca: Path
    server_cert: Path
    server_key: Path
    #: (cert, key) per client common name.
    clients: dict[str, tuple[Path, Path]]
    #: A client certificate signed by the other CA (not trusted by the broker).
    stranger: tuple[Path, Path]


def make_pki(directory: Path, clients: tuple[str, ...] = ("alice", "admin"),
             hosts: tuple[str, ...] = ("localhost", "127.0.0.1")) -> Pki:
    ca = authority(directory, "ca")
    other = authority(directory, "other")
    server_cert, server_key = ca.issue(directory, "server", "localhost", server=True, hosts=hosts)
    issued = {cn: ca.issue(directory, f"client-{cn}", cn, server=False) for cn in clients}
    stranger = other.issue(directory, "stranger", "alice", server=False)
    return Pki(ca.cert_file, other.cert_file, server_cert, server_key, issued, stranger)

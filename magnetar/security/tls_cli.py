"""``magnetar tls create-test-certs``: a CA, a broker certificate and client
certificates to try TLS with (docs/security.md), and the settings that use them."""
from __future__ import annotations

from pathlib import Path
from typing import List

import typer

app = typer.Typer(help="TLS files for trying TLS out.", no_args_is_help=True, add_completion=False)


@app.command("create-test-certs")
def create_test_certs(
    directory: Path = typer.Option(Path("./certs"), "--dir", "-d", help="Where to write the PEM files"),
    hosts: List[str] = typer.Option(["localhost", "127.0.0.1"], "--host",
                                    help="A name or address the broker certificate is valid for (repeat)"),
    clients: List[str] = typer.Option(["admin"], "--client",
                                      help="A client certificate for this role, its CN (repeat)"),
    days: int = typer.Option(365, "--days", min=1, help="Validity"),
) -> None:
    """Write a test CA, a broker certificate and client certificates, then print the settings that use them."""
    from rich.console import Console

    from .certificates import create_test_certificates

    err = Console(stderr=True, soft_wrap=True)
    try:
        made = create_test_certificates(directory, hosts, clients, days)
    except (OSError, ValueError) as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(1)
    d = directory.resolve()
    print(f"# wrote {d}/ca.cert.pem (and ca.key.pem), broker.cert.pem, broker.key.pem"
          + "".join(f", {role}.cert.pem, {role}.key.pem" for role in made.clients))
    print("# broker config (TOML):")
    print("tls_port = 6651")
    print("admin_tls_port = 8443")
    print(f'tls_certificate_file = "{made.broker_cert.resolve()}"')
    print(f'tls_key_file = "{made.broker_key.resolve()}"')
    print(f'tls_trust_certs_file = "{made.ca.resolve()}"')

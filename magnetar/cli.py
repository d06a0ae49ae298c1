"""The ``magnetar`` command: run a broker, produce and consume from a shell."""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

app = typer.Typer(help="Magnetar: a streaming broker that speaks the Apache Pulsar protocol.",
                  no_args_is_help=True, add_completion=False)
# soft_wrap: an error piped to a file or a pipe (rich's width is 80 there) stays one line.
err = Console(stderr=True, soft_wrap=True)


def _version(value: bool) -> None:
    if value:
        from magnetar import __version__

        print(f"magnetar {__version__}")
        raise typer.Exit()


@app.callback()
def _main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit")) -> None:
    """Magnetar: a streaming broker that speaks the Apache Pulsar protocol."""

# `magnetar admin ...`: the admin REST API from a shell (light: stdlib HTTP only).
from magnetar.admin.cli import app as admin_app  # noqa: E402

app.add_typer(admin_app, name="admin")

# `magnetar tokens ...`: keys and tokens for token authentication.
from magnetar.security.tokens_cli import app as tokens_app  # noqa: E402

app.add_typer(tokens_app, name="tokens")

# `magnetar tls create-test-certs`: a CA and certificates to try TLS with.
from magnetar.security.tls_cli import app as tls_app  # noqa: E402

app.add_typer(tls_app, name="tls")

# `magnetar broker` (one member of a cluster) and `magnetar cluster up`.
from magnetar.cluster_cli import broker as broker_command, cluster_app, geo_app  # noqa: E402

app.command("broker")(broker_command)
app.add_typer(cluster_app, name="cluster")
app.add_typer(geo_app, name="geo")

DEFAULT_URL = "pulsar://localhost:6650"

# Credentials and TLS files of produce and consume: the admin CLI's names.
AuthToken = Annotated[str, typer.Option("--auth-token", envvar="MAGNETAR_AUTH_TOKEN",
                                        help="A JWT, or file:///path to one (the token provider)")]
AuthBasic = Annotated[str, typer.Option("--auth-basic", envvar="MAGNETAR_AUTH_BASIC",
                                        help="user:password (the basic provider)")]
TlsTrustCerts = Annotated[str, typer.Option("--tls-trust-certs-file",
                                            help="CA certificates that verify a pulsar+ssl broker (default: the system's)")]
TlsCert = Annotated[str, typer.Option("--tls-cert-file", help="Client certificate (the tls provider: its CN is the role)")]
TlsKey = Annotated[str, typer.Option("--tls-key-file", help="Its private key")]


def _client(service_url: str, auth_token: str, auth_basic: str, tls_trust_certs_file: str, tls_cert_file: str,
            tls_key_file: str):
    """A client with the command's credential and TLS files; exit 2 saying
    why when they cannot be used (two credentials, a missing file, ...)."""
    from magnetar.client import AuthenticationBasic, AuthenticationTLS, AuthenticationToken, Client, PulsarError

    try:
        if sum(map(bool, (auth_token, auth_basic, tls_cert_file or tls_key_file))) > 1:
            raise ValueError("give one credential: --auth-token, --auth-basic or --tls-cert-file/--tls-key-file")
        auth = None
        if auth_token:
            auth = AuthenticationToken(auth_token)
        elif auth_basic:
            user, sep, password = auth_basic.partition(":")
            if not sep:
                raise ValueError("--auth-basic must be user:password")
            auth = AuthenticationBasic(user, password)
        elif tls_cert_file or tls_key_file:
            if not (tls_cert_file and tls_key_file):
                raise ValueError("a client certificate needs both --tls-cert-file and --tls-key-file")
            auth = AuthenticationTLS(tls_cert_file, tls_key_file)
        return Client(service_url, authentication=auth, tls_trust_certs_file_path=tls_trust_certs_file or None)
    except (ValueError, PulsarError) as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(2)


def _register_perf() -> None:
    # magnetar.perf.cli keeps its heavy imports (pulsar, hdrh) inside the
    # commands, so `magnetar standalone` does not pay for the load generator.
    from magnetar.perf.cli import app as perf_app

    app.add_typer(perf_app, name="perf")


_register_perf()


@app.command()
def standalone(
    data_dir: Optional[str] = typer.Option(None, "--data-dir", help="Where ledgers and metadata live [./data]"),
    port: Optional[int] = typer.Option(None, "--port", help="Pulsar protocol port [6650]"),
    admin_port: Optional[int] = typer.Option(None, "--admin-port", help="Admin HTTP port; -1 disables it [8080]"),
    config: Optional[str] = typer.Option(None, "--config", help="TOML config file (see magnetar.example.toml)"),
    bind_address: Optional[str] = typer.Option(None, "--bind-address", help="Listen address [127.0.0.1]"),
    advertised_address: Optional[str] = typer.Option(None, "--advertised-address",
                                                     help="Host name clients are told to use [localhost]"),
    sync_policy: Optional[str] = typer.Option(None, "--sync-policy",
                                              help="always | interval | never [always]"),
    log_level: Optional[str] = typer.Option(None, "--log-level", help="DEBUG, INFO, WARNING, ERROR [INFO]"),
) -> None:
    """Run a single-process broker (Pulsar protocol + admin HTTP) until Ctrl-C or SIGTERM."""
    from magnetar.broker_command import load_or_exit, run_or_exit

    overrides = {
        "data_dir": data_dir, "port": port, "admin_port": admin_port, "bind_address": bind_address,
        "advertised_address": advertised_address, "log_level": log_level,
    }
    if sync_policy is not None:
        overrides["storage"] = {"sync_policy": sync_policy}
    run_or_exit(load_or_exit(config, overrides))


def _check_url(service_url: str) -> None:
    from magnetar.service_urls import require_pulsar_url

    try:
        require_pulsar_url(service_url)
    except ValueError as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(2)


@app.command()
def produce(
    topic: str = typer.Argument(..., help="Topic name (short names go to public/default)"),
    message: Optional[list[str]] = typer.Option(None, "-m", "--message", help="Message body; repeat for several"),
    files: Optional[list[Path]] = typer.Option(None, "-f", "--files",
                                               help="A file whose bytes are one message; repeat for several"),
    num: int = typer.Option(1, "-n", "--num-produce", help="Send the message list this many times"),
    key: Optional[str] = typer.Option(None, "-k", "--key", help="Partition key"),
    properties: Optional[list[str]] = typer.Option(None, "-p", "--property", help="key=value; repeat for several"),
    rate: float = typer.Option(0, "-r", "--rate", help="Messages per second; 0 = as fast as acknowledged"),
    service_url: str = typer.Option(DEFAULT_URL, "--service-url", "-u", envvar="MAGNETAR_SERVICE_URL"),
    auth_token: AuthToken = "", auth_basic: AuthBasic = "", tls_trust_certs_file: TlsTrustCerts = "",
    tls_cert_file: TlsCert = "", tls_key_file: TlsKey = "",
) -> None:
    """Publish messages and print each message id (pulsar+ssl:// and
    credentials as in docs/security.md)."""
    from magnetar.client import PulsarError

    _check_url(service_url)
    if num < 1:
        err.print("[red]--num-produce must be at least 1[/red]")
        raise typer.Exit(2)
    if rate < 0:
        err.print("[red]--rate must be 0 (no limit) or positive[/red]")
        raise typer.Exit(2)
    bodies = [m.encode() for m in message or []]
    for path in files or []:
        try:
            bodies.append(path.read_bytes())
        except OSError as exc:
            err.print(f"[red]cannot read {path}:[/red] {exc.strerror or exc}")
            raise typer.Exit(2)
    if not bodies:
        err.print("[red]nothing to send:[/red] give -m MESSAGE or -f FILE")
        raise typer.Exit(2)
    props = {}
    for item in properties or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            err.print(f"[red]--property {item!r} must be key=value[/red]")
            raise typer.Exit(2)
        props[name] = value
    client = _client(service_url, auth_token, auth_basic, tls_trust_certs_file, tls_cert_file, tls_key_file)
    try:
        producer = client.create_producer(topic)
        start, sent = time.monotonic(), 0
        for _ in range(num):
            for body in bodies:
                if rate:
                    ahead = start + sent / rate - time.monotonic()
                    if ahead > 0:
                        time.sleep(ahead)  # keep to --rate
                msg_id = producer.send(body, properties=props or None, partition_key=key)
                sent += 1
                typer.echo(str(msg_id))
        producer.close()
    except PulsarError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1)
    finally:
        client.close()


@app.command()
def consume(
    topic: str = typer.Argument(...),
    subscription: str = typer.Option(..., "-s", "--subscription-name"),
    num: int = typer.Option(1, "-n", "--num-messages", help="Stop after this many messages; 0 = forever"),
    subscription_type: str = typer.Option("Exclusive", "-t", "--subscription-type",
                                          help="Exclusive, Shared, Failover or Key_Shared"),
    position: str = typer.Option("earliest", "-p", "--subscription-position", help="earliest or latest"),
    timeout: float = typer.Option(0, "--timeout", help="Give up after this many seconds without a message; 0 = wait"),
    service_url: str = typer.Option(DEFAULT_URL, "--service-url", "-u", envvar="MAGNETAR_SERVICE_URL"),
    auth_token: AuthToken = "", auth_basic: AuthBasic = "", tls_trust_certs_file: TlsTrustCerts = "",
    tls_cert_file: TlsCert = "", tls_key_file: TlsKey = "",
) -> None:
    """Receive, print (id, key, properties, body) and acknowledge messages
    (pulsar+ssl:// and credentials as in docs/security.md)."""
    from magnetar.client import ConsumerType, InitialPosition, PulsarError, Timeout

    types = {"exclusive": ConsumerType.Exclusive, "shared": ConsumerType.Shared, "failover": ConsumerType.Failover,
             "key_shared": ConsumerType.KeyShared}
    positions = {"earliest": InitialPosition.Earliest, "latest": InitialPosition.Latest}
    if subscription_type.lower().replace("-", "_") not in types:
        err.print(f"[red]unknown subscription type {subscription_type!r}[/red]: "
                  f"use Exclusive, Shared, Failover or Key_Shared")
        raise typer.Exit(2)
    if position.lower() not in positions:
        err.print(f"[red]unknown position {position!r}[/red]: use earliest or latest")
        raise typer.Exit(2)
    if num < 0:
        err.print(f"[red]--num-messages must be 0 (forever) or positive, not {num}[/red]")
        raise typer.Exit(2)
    _check_url(service_url)
    client = _client(service_url, auth_token, auth_basic, tls_trust_certs_file, tls_cert_file, tls_key_file)
    try:
        consumer = client.subscribe(topic, subscription,
                                    consumer_type=types[subscription_type.lower().replace("-", "_")],
                                    initial_position=positions[position.lower()])
        received = 0
        while num == 0 or received < num:
            try:
                msg = consumer.receive(timeout_millis=int(timeout * 1000) if timeout else None)
            except Timeout:
                err.print(f"no message within {timeout} s")
                raise typer.Exit(1)
            data = msg.data()
            try:
                text = data.decode()
            except UnicodeDecodeError:
                text = data.hex()
            extra = ""
            if msg.partition_key():
                extra += f" key={msg.partition_key()}"
            if msg.properties():
                extra += " properties=" + ",".join(f"{k}={v}" for k, v in sorted(msg.properties().items()))
            typer.echo(f"{msg.message_id()}{extra} {text}")
            consumer.acknowledge(msg)
            received += 1
        consumer.close()
    except PulsarError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1)
    finally:
        client.close()


def hoist_admin_json(argv: list[str]) -> list[str]:
    """``admin ... --json`` anywhere after ``admin`` means ``admin --json ...``:
    users type it at the end, the option belongs to ``admin``."""
    if "admin" not in argv or "--json" not in argv[argv.index("admin") + 1:]:
        return argv
    at = argv.index("admin")
    rest = [a for a in argv[at + 1:] if a != "--json"]
    return argv[:at + 1] + ["--json"] + rest


def main() -> None:  # pragma: no cover
    app(args=hoist_admin_json(sys.argv[1:]))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""A real broker process for integration tests.

Started with ``python -m magnetar.cli standalone`` on free ports (port 0 the
first time; the same ports again after a restart so clients can reconnect),
data in a temporary directory. The broker prints ``READY pulsar=P admin=A``
when it accepts connections; start() waits for that line with a deadline.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable


class BrokerProcess:
    def __init__(self, data_dir: Path, extra_args: list[str] | None = None,
                 preexec_fn: Callable[[], None] | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.extra_args = list(extra_args or [])
        #: Run in the broker's process before it starts (e.g. set an rlimit).
        self.preexec_fn = preexec_fn
        self.port = 0
        self.admin_port = 0
        self.proc: subprocess.Popen | None = None
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}-broker.log"
        self._ready = threading.Event()

    @classmethod
    def with_config(cls, tmp_path: Path, toml: str, preexec_fn: Callable[[], None] | None = None) -> "BrokerProcess":
        """A broker (not started) whose config file holds ``toml``."""
        config = tmp_path / "broker.toml"
        config.write_text(toml)
        return cls(tmp_path / "data", ["--config", str(config)], preexec_fn)

    @property
    def service_url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    def start(self, timeout: float = 30.0) -> "BrokerProcess":
        self._ready.clear()
        log = open(self.log_path, "ab")
        args = [
            sys.executable, "-m", "magnetar.cli", "standalone",
            "--data-dir", str(self.data_dir),
            "--port", str(self.port),
            "--admin-port", str(self.admin_port),
            "--advertised-address", "127.0.0.1",
            *self.extra_args,
        ]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, env=env, preexec_fn=self.preexec_fn)
        threading.Thread(target=self._read_stdout, args=(self.proc,), daemon=True).start()
        if not self._ready.wait(timeout):
            self.kill()
            raise AssertionError(f"broker did not become ready in {timeout} s; log:\n{self.log()}")
        return self

    def _read_stdout(self, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode(errors="replace").strip()
            if line.startswith("READY "):
                fields = dict(part.split("=", 1) for part in line.split()[1:])
                self.port = int(fields["pulsar"])
                self.admin_port = int(fields["admin"])
                self.tls_port = int(fields.get("tls", -1))
                self.admin_tls_port = int(fields.get("admin_tls", -1))
                self._ready.set()

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-20000:]
        except FileNotFoundError:
            return ""

    def notable_log(self, limit: int = 40) -> str:
        """The broker's warnings and errors (every run since the first start),
        for assertion messages: why a crash test went wrong is usually there."""
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return ""
        notable = [line for line in lines if " WARNING " in line or " ERROR " in line or "Traceback" in line]
        return "\n".join(notable[-limit:])

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM: a clean shutdown that syncs and closes ledgers."""
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self.proc = None

    def kill(self) -> None:
        """SIGKILL: a crash, nothing flushed by the broker."""
        if self.proc is None:
            return
        self.proc.kill()
        self.proc.wait(10)
        self.proc = None

    def restart(self, crash: bool = False) -> "BrokerProcess":
        self.kill() if crash else self.stop()
        # The listening port may linger briefly in the kernel after a kill.
        deadline = time.monotonic() + 10
        while True:
            try:
                return self.start()
            except AssertionError:
                if time.monotonic() > deadline:
                    raise

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def token_secured_broker(tmp_path: Path, authorization: bool = True, extra: str = "") -> tuple["BrokerProcess", bytes]:
    """A started broker that wants tokens signed with a fresh HS256 secret
    (returned), with authorization and "admin" as super-user unless told not."""
    secret = os.urandom(32)
    key = tmp_path / "secret.key"
    key.write_bytes(secret)
    rules = 'authorization_enabled = true\nsuper_user_roles = ["admin"]\n' if authorization else ""
    broker = BrokerProcess.with_config(tmp_path, f"""
authentication_enabled = true
authentication_providers = ["token"]
token_secret_key = "file://{key}"
{rules}{extra}
""").start()
    return broker, secret


def certificate_secured_broker(tmp_path: Path, pki) -> "BrokerProcess":
    """A started broker with pulsar+ssl and https on free ports, client
    certificates as the only credential (the tls provider) and authorization:
    "admin" may do anything, nobody else anything not granted. ``pki``: a
    ``tests.pki.make_pki`` result."""
    return BrokerProcess.with_config(tmp_path, f"""
tls_port = 0
admin_tls_port = 0
tls_certificate_file = "{pki.server_cert}"
tls_key_file = "{pki.server_key}"
tls_trust_certs_file = "{pki.ca}"
authentication_enabled = true
authentication_providers = ["tls"]
authorization_enabled = true
super_user_roles = ["admin"]
""").start()

"""What the tests share, in one place (fixtures are in the conftest.py
files; the processes a test starts are magnetar_harness's):

- :func:`wait_for` / :func:`wait_until`: wait on a condition with a
  deadline (a thread, a coroutine), never on a guess of how long;
- :func:`unique`: a name no other test (or earlier run) uses;
- :func:`quiet_logger`: the official client's logger, warnings only;
- :func:`start_broker` / :func:`stop_broker`: a standalone broker with a
  config, and a stop that fails the test unless the broker exits cleanly;
- :func:`shared_broker` / :func:`shared_client`: one broker (and one
  official client on it) for a whole module, where starting one per test
  costs more than the tests share;
- :func:`as_bytes`: a decoder's column buffers as comparable values;
- :func:`close_after_kill`: close an official client whose broker was killed;
- :func:`opened_factories`: managed-ledger factories on one directory and
  store, each closed at the end.
"""
from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
import uuid
from pathlib import Path
from typing import Any, Callable

import pytest

from magnetar_harness.broker import BrokerProcess, standalone_broker
from magnetar_harness.waiting import wait_for

__all__ = ["wait_for", "wait_until", "unique", "quiet_logger", "start_broker", "stop_broker", "shared_broker",
           "shared_client", "as_bytes", "close_after_kill",
           "opened_factories"]


async def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition",
                     interval: float = 0.01) -> Any:
    """Poll ``predicate`` (a function, or a coroutine function) on the
    running loop until it returns a truthy value, and return that value;
    AssertionError naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(interval)


def unique(prefix: str = "t") -> str:
    """``prefix-`` and ten random hex digits: a topic, subscription or
    namespace name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def quiet_logger() -> logging.Logger:
    """For ``pulsar.Client(logger=...)``: its INFO lines would drown a failure."""
    logger = logging.getLogger("pulsar-client")
    logger.setLevel(logging.WARNING)
    return logger


def start_broker(directory: Path, config: str | None = None) -> BrokerProcess:
    """A started standalone broker on ``directory/data``; ``config``: the
    TOML of its config file (``directory/broker.toml``)."""
    args: list[str] = []
    if config is not None:
        path = Path(directory) / "broker.toml"
        path.write_text(config)
        args = ["--config", str(path)]
    return standalone_broker(Path(directory) / "data", args).start()


def stop_broker(proc: BrokerProcess) -> None:
    """SIGTERM; the test fails unless the broker exits with 0."""
    if proc.alive:
        code = proc.stop()
        assert code == 0, f"broker exited with {code}; log:\n{proc.log()}"


def shared_broker(config: str | None = None, name: str = "broker"):
    """A module-scoped fixture (assign it: ``broker = shared_broker(CONFIG)``):
    one standalone broker for every test of the module, stopped cleanly after
    the last. It replaces conftest's ``broker`` (a fresh one per test)."""

    @pytest.fixture(scope="module", name=name)
    def module_broker(tmp_path_factory, request):
        proc = start_broker(tmp_path_factory.mktemp(request.module.__name__.rpartition(".")[2]), config)
        yield proc
        stop_broker(proc)

    return module_broker


def shared_client(name: str = "client"):
    """A module-scoped fixture (``client = shared_client()``): the official
    client on the module's shared ``broker``, closed after the last test."""

    @pytest.fixture(scope="module", name=name)
    def module_client(broker):
        import pulsar

        client = pulsar.Client(broker.service_url, operation_timeout_seconds=10, logger=quiet_logger())
        yield client
        client.close()

    return module_client


def as_bytes(buffers: tuple) -> tuple:
    """The Spark connector's decoded column buffers (the compiled decoder
    hands out buffer objects, its twin bytes) with every buffer as bytes."""
    return tuple(x if isinstance(x, int) else bytes(x) for x in buffers)


def close_after_kill(client) -> None:
    """Close an official client whose broker was just killed. The client's
    close then races its own reconnect: closing a producer whose connection
    is gone answers ``NotConnected`` (or ``ConnectError``, ``AlreadyClosed``)
    and ``close()`` raises it, though every resource is released. Any other
    error still fails the test."""
    import pulsar

    try:
        client.close()
    except (pulsar.NotConnected, pulsar.ConnectError, pulsar.AlreadyClosed):
        pass


@contextlib.asynccontextmanager
async def opened_factories(data_dir: Path, store):
    """Yields ``make(**config)``, which opens a ``ManagedLedgerFactory`` on
    ``data_dir`` and ``store`` with a ``StorageConfig(**config)``; at the end
    every one made is closed (or, if a test abandoned it, its writer thread
    stopped)."""
    from magnetar.storage import ManagedLedgerFactory, StorageConfig

    made: list[ManagedLedgerFactory] = []

    def make(**config) -> ManagedLedgerFactory:
        factory = ManagedLedgerFactory(data_dir, store, StorageConfig(**config))
        made.append(factory)
        return factory

    try:
        yield make
    finally:
        for factory in made:
            if not factory._closed:
                await factory.close()
            elif factory.backend.writer._thread.is_alive():
                await factory.backend.writer.close()

"""Fixtures every test may use. Plain helpers (waiting, names, loggers) are in
tests/helpers.py; the processes a test starts are magnetar_harness's."""
from __future__ import annotations

import os

import pytest

# gRPC's fork handlers off in the test processes, set before any test module
# imports grpc. With them on (grpcio's default), a fork that runs Python in the
# child before exec (pyspark starts its JVM with a preexec_fn; so can the
# harness's launches) in a worker whose etcd client still has gRPC threads
# runs gRPC's child handler mid-call, and the child sometimes dies before
# exec: "Java gateway process exited before sending its port number" (CI, and
# 1 of 25 launches beside a busy etcd client in a scratch driver; 0 of 27 with
# this). Nothing in the suite uses gRPC in a forked child.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")

from magnetar_harness.etcd import running_etcd
from magnetar_harness.objectstore import running_seaweed
from tests.helpers import wait_until as _wait_until


@pytest.hookimpl(tryfirst=True)  # before -m deselects
def pytest_collection_modifyitems(items):
    """Every test of a ``test_chaos_*.py`` file is a chaos test (a short
    fault-injection run): ``make chaos`` selects them (``-m chaos``), the
    default run (``make test``: pyproject's ``-m 'not chaos'``) leaves them out."""
    for item in items:
        if item.path.name.startswith("test_chaos_"):
            item.add_marker(pytest.mark.chaos)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """With ``MAGNETAR_FORBID_SKIPS=1`` (``.ci/run`` sets it) a skipped test
    fails instead, naming what it would have skipped for: on CI, root and
    every tool the project installs are there, so a skip can only mean a
    broken install, which a quiet skip would hide."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("MAGNETAR_FORBID_SKIPS") == "1" \
            and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped where skips are forbidden (MAGNETAR_FORBID_SKIPS=1): {reason}"


@pytest.fixture
def wait_until():
    """:func:`tests.helpers.wait_until`, for tests that take it as a fixture."""
    return _wait_until


@pytest.fixture(scope="session")
def etcd_server(tmp_path_factory):
    """One real etcd per test session (per xdist worker): each test keeps its
    keys under a prefix of its own (``etcd_server.store_url(prefix)``)."""
    with running_etcd(tmp_path_factory.mktemp("etcd")) as server:
        yield server


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory):
    """One real SeaweedFS S3 endpoint per test session (per xdist worker),
    bucket ``magnetar-tests``: each test keeps its objects under a prefix of
    its own (``seaweed.store_url(prefix)``)."""
    with running_seaweed(tmp_path_factory.mktemp("objectstore"), bucket="magnetar-tests") as server:
        yield server


@pytest.fixture(params=["memory", "etcd"])
async def memory_or_etcd_store(request):
    """A metadata store of each kind a broker runs on: in memory, and on
    the session's real etcd (``etcd_server``) under a prefix of its own."""
    import time

    from magnetar.metadata import EtcdMetadataStore, MemoryMetadataStore

    if request.param == "memory":
        store = MemoryMetadataStore()
    else:
        url = request.getfixturevalue("etcd_server").store_url(f"store-{os.getpid()}-{time.monotonic_ns()}")
        store = await EtcdMetadataStore.open(url)
    try:
        yield store
    finally:
        await store.close()

"""The S3 object store against a real SeaweedFS: every call of the seam, and
the errors a user meets."""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import pytest

from magnetar.metadata.etcd_server import free_port
from magnetar.objectstore.s3 import open_object_store
from magnetar.objectstore.store import (
    ObjectExists,
    ObjectInfo,
    ObjectNotFound,
    ObjectStore,
    ObjectStoreConfigError,
    ObjectStoreError,
)


async def test_put_get_and_ranged_get(store):
    assert isinstance(store, ObjectStore)
    data = bytes(range(256)) * 1024  # 256 KiB
    await store.put("seg/1", data)
    assert await store.get("seg/1") == data
    assert await store.get("seg/1", 1000, 5096) == data[1000:5096]
    assert await store.get("seg/1", 250_000) == data[250_000:]
    assert await store.get("seg/1", 0, 1) == data[:1]


async def test_conditional_put_refuses_an_existing_key_and_keeps_the_first(store):
    await store.put("k", b"first")
    with pytest.raises(ObjectExists, match="'k' exists already"):
        await store.put("k", b"second")
    assert await store.get("k") == b"first"
    await store.put("k", b"third", if_absent=False)
    assert await store.get("k") == b"third"


async def test_get_of_a_missing_key_is_not_found(store):
    with pytest.raises(ObjectNotFound, match="no object 'nope'"):
        await store.get("nope")
    with pytest.raises(ObjectNotFound):
        await store.get("nope", 0, 10)


async def test_delete_is_idempotent(store):
    await store.put("d", b"x")
    await store.delete("d")
    with pytest.raises(ObjectNotFound):
        await store.get("d")
    await store.delete("d")
    await store.put("d", b"again")  # the key is free again
    assert await store.get("d") == b"again"


async def test_list_by_prefix_with_sizes_sorted(store, seaweed, store_url):
    for key, size in (("b/2", 2), ("a/1", 1), ("b/10", 10), ("c", 3)):
        await store.put(key, b"x" * size)
    assert await store.list("b/") == [ObjectInfo("b/10", 10), ObjectInfo("b/2", 2)]
    assert [info.key for info in await store.list()] == ["a/1", "b/10", "b/2", "c"]
    assert await store.list("zzz") == []
    # Keys are relative to the URL's prefix: another prefix sees none of them.
    other = open_object_store(seaweed.store_url("elsewhere-" + store_url.rsplit("/", 1)[-1].split("?")[0]))
    try:
        assert await other.list() == []
    finally:
        await other.close()


async def test_check_passes_on_a_usable_store(store):
    await store.check()


async def test_missing_bucket_is_one_clear_config_error(seaweed):
    store = open_object_store(f"s3://no-such-bucket-here?endpoint={seaweed.endpoint}")
    try:
        with pytest.raises(ObjectStoreConfigError) as error:
            await store.check()
    finally:
        await store.close()
    message = str(error.value)
    assert "the bucket does not exist" in message and "\n" not in message


async def test_unreachable_endpoint_is_one_clear_error_quickly():
    store = open_object_store(f"s3://bucket?endpoint=http://127.0.0.1:{free_port()}")
    started = time.monotonic()
    try:
        with pytest.raises(ObjectStoreConfigError) as error:
            await store.check()
    finally:
        await store.close()
    assert time.monotonic() - started < 12
    assert "connection refused" in str(error.value) and "\n" not in str(error.value)


async def test_a_transient_failure_at_run_time_is_retryable(seaweed, store, store_url):
    """A store that stops answering mid-run: the call fails with the plain,
    retryable ObjectStoreError (not a config error), within the bound."""
    await store.put("before", b"x")
    impatient = open_object_store(store_url, retry_timeout=1.0, request_timeout=1.0, connect_timeout=0.5)
    try:
        seaweed.pause()
        try:
            started = time.monotonic()
            with pytest.raises(ObjectStoreError) as error:
                await impatient.get("before")
            assert not isinstance(error.value, ObjectStoreConfigError)
            assert time.monotonic() - started < 10
        finally:
            seaweed.resume()
    finally:
        await impatient.close()
    assert await store.get("before") == b"x"  # retried by the client until the store answers again


async def test_a_closed_store_refuses_calls(store):
    await store.close()
    with pytest.raises(ObjectStoreError, match="closed"):
        await store.get("x")
    await store.close()  # idempotent


def test_a_process_that_ends_after_a_refused_connection_exits_cleanly(tmp_path):
    """The start-up check of a store that refuses connections ends its process
    with the check's error, not an abort (exit 134): obstore 0.12.1 aborted
    when its client was freed at interpreter shutdown (close() frees it
    first), and in about 1 exit in 20 on asyncio's own loop, when one of its
    threads took the GIL back during shutdown (the check runs on uvloop)."""
    script = tmp_path / "probe.py"
    script.write_text(
        "from magnetar.objectstore.s3 import check_object_store\n"
        "from magnetar.objectstore.store import ObjectStoreConfigError\n"
        "try:\n"
        f"    check_object_store('s3://bkt?endpoint=http://127.0.0.1:{free_port()}')\n"
        "except ObjectStoreConfigError as exc:\n"
        "    print(type(exc).__name__)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    for _ in range(8):
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "ObjectStoreConfigError"


async def test_concurrent_puts_all_land(store):
    await asyncio.gather(*(store.put(f"p/{i:03}", str(i).encode()) for i in range(50)))
    assert len(await store.list("p/")) == 50


async def test_check_probes_the_conditional_put_and_leaves_nothing(store):
    await store.check()
    assert await store.list() == []  # the probe object is deleted


async def test_conditional_put_off_overwrites(store_url):
    store = open_object_store(store_url + "&conditional_put=off")
    try:
        await store.check()
        await store.put("k", b"one")
        await store.put("k", b"two")  # no If-None-Match: the second wins
        assert await store.get("k") == b"two"
    finally:
        await store.close()

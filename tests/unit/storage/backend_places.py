"""Where the LedgerBackend contract tests keep ledgers: one place per backend.

A place is what several brokers share (a data directory; an etcd prefix and
an object store prefix). :meth:`Place.open` gives a new backend on it, as a
new broker's would be, with clients of its own. A new backend joins the
contract suite (test_backend_contract.py) with a place here and a name in
``KINDS``.

:func:`open_backend` also runs in a child process (the crash test:
``python -m tests.unit.storage.backend_places SPEC LEDGER_ID`` writes until
killed, printing ``acked FIRST COUNT`` once a batch is durable).
"""
from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from magnetar.metadata import EtcdMetadataStore
from magnetar.objectstore.s3 import open_object_store
from magnetar.storage import LedgerBackend, StorageConfig
from magnetar.storage.file import FileBackend

KINDS = ["file", "object", "object-v1"]  # object: layout format 2 (the default); object-v1: format 1


async def open_backend(spec: dict) -> tuple[LedgerBackend, list]:
    """A new backend on the place ``spec`` describes, and what to close after
    it (its metadata store: the object backend does not own it)."""
    if spec["kind"] == "file":
        return FileBackend(Path(spec["data_dir"]), StorageConfig(sync_policy="always")), []
    from magnetar.storage.object.object_backend import ObjectBackend

    store = await EtcdMetadataStore.open(spec["etcd_url"])
    backend = ObjectBackend(store, open_object_store(spec["objects_url"]), commit_interval_ms=5,
                            collect_interval_s=None, layout=spec.get("layout", 2))
    return backend, [store]


class Place:
    def __init__(self, spec: dict) -> None:
        self.spec = spec
        self.kind = spec["kind"]
        self._open: list[LedgerBackend] = []
        self._closers: list = []

    async def open(self) -> LedgerBackend:
        backend, closers = await open_backend(self.spec)
        self._open.append(backend)
        self._closers += closers
        return backend

    async def close(self) -> None:
        for backend in self._open:
            try:
                await backend.close()
            except Exception:  # noqa: BLE001 (abandoned or closed by the test already)
                pass
        for store in self._closers:
            await store.close()



async def _write_until_killed(spec: dict, ledger_id: int) -> None:
    backend, _ = await open_backend(spec)
    ledger = await backend.create(ledger_id)
    loop = asyncio.get_running_loop()
    print("created", flush=True)

    def receipt(first: int, count: int):
        def callback(error: BaseException | None) -> None:
            if error is None:
                sys.stdout.write(f"acked {first} {count}\n")  # one write per receipt
                sys.stdout.flush()
        return callback

    n = 0
    while True:
        datas = [str(i).encode() * 50 for i in range(n, n + 10)]
        backend.submit(ledger, datas, receipt(n, len(datas)), loop)
        n += len(datas)
        await asyncio.sleep(0.001)


if __name__ == "__main__":
    asyncio.run(_write_until_killed(json.loads(sys.argv[1]), int(sys.argv[2])))

"""The faults of a cluster on object storage (``--storage object``):

- ``kill-objectstore``: SIGKILL the SeaweedFS, restart it on the same data
  after 1-3 s (PUTs and GETs fail meanwhile: sends must wait, bounded, and
  fail retryably; no receipt for an uncommitted entry);
- ``pause-objectstore``: SIGSTOP it for 1-4 s (requests hang, then time out);
- ``kill-wipe``: SIGKILL a broker, delete its whole data directory, start it
  again: on object storage a broker keeps nothing it cannot lose, so every
  receipt it gave must survive and its topics serve again;
- ``cut-objectstore`` (root: network namespaces, :mod:`.netns`): a broker's
  packets to the object store vanish for 2-12 s while it keeps etcd, its
  peers and its clients: it keeps its bundles, its commits cannot land
  (sends wait, bounded, and fail retryably), then they do again.

The store is :class:`magnetar.objectstore.seaweed.SeaweedServer`, started the
harness's way (it dies with the run).
"""
from __future__ import annotations

import random
import shutil
import time
from pathlib import Path

from magnetar_harness.broker import BrokerProcess

STORAGE_KINDS = ("file", "object")
OBJECT_STORE_FAULTS = ("kill-objectstore", "pause-objectstore")
#: Faults that only mean something when the ledgers are in the object store.
OBJECT_ONLY_FAULTS = OBJECT_STORE_FAULTS + ("kill-wipe", "cut-objectstore")
#: The run's bucket in its own SeaweedFS.
BUCKET = "magnetar-chaos"


def checked_storage(storage: str, faults) -> str:
    """``storage`` if known and fit for ``faults``; ValueError (nothing
    started yet) otherwise."""
    if storage not in STORAGE_KINDS:
        raise ValueError(f"storage {storage!r} is not available; choose from {', '.join(STORAGE_KINDS)}")
    wanted = sorted(set(faults) & set(OBJECT_ONLY_FAULTS))
    if wanted and storage != "object":
        raise ValueError(f"{', '.join(wanted)} need --storage object (with file storage the ledgers are in the "
                         "shared directory, not in an object store, and a broker's own directory is not all it has)")
    return storage


def hit_objectstore(server, kind: str, rng: random.Random) -> str:
    """``kill-objectstore`` or ``pause-objectstore``; returns once it runs again."""
    if kind == "kill-objectstore":
        server.kill()
        down = rng.uniform(1.0, 3.0)
        time.sleep(down)  # down: commits fail, sends wait
        server.start()
        return f"kill-objectstore, down {down:.1f} s"
    server.pause()
    try:
        held = rng.uniform(1.0, 4.0)
        time.sleep(held)  # frozen: requests hang until their timeouts
    finally:
        server.resume()
    return f"pause-objectstore {held:.1f} s"


def kill_and_wipe(broker: BrokerProcess, data_dir: Path, rng: random.Random, name: str) -> str:
    """SIGKILL ``broker``, delete ``data_dir`` (its own files) and start it again."""
    broker.kill()
    shutil.rmtree(data_dir, ignore_errors=True)
    time.sleep(rng.uniform(0.5, 2.0))  # down for a while: clients retry against nothing
    broker.start()
    return f"kill-wipe {name} (data directory {data_dir.name} deleted)"


def cut_from_objectstore(net, victim: int, rng: random.Random) -> str:
    """Cut broker ``victim`` from the object store for 2-12 s, then heal.
    ``net``: the run's :class:`~.netns.Network`."""
    from .netns import OBJECTSTORE_MODE

    held = rng.uniform(2.0, 12.0)  # both sides of a commit's PUT time-out
    net.partition(OBJECTSTORE_MODE, victim)
    try:
        time.sleep(held)
    finally:
        net.heal()
    return f"cut-objectstore broker-{victim} {held:.1f} s"


def stop_objectstore(server) -> None:
    """Stop it cleanly, even if a fault left it paused (SIGCONT first)."""
    if server is None or not server.running:
        return
    try:
        server.resume()
    except RuntimeError:
        pass
    server.stop()

"""An etcd server of its own, for a cluster, regions or a metadata test.

The server itself is the product's :class:`~magnetar.metadata.etcd_server.EtcdServer`
(``magnetar cluster up`` runs the same one): the binary the ``cluster`` extra
installs, on free ports, waited for until healthy; ``stop``, ``kill``,
``pause``/``resume``. This module only starts it the harness's way.

Failure modes: those of ``EtcdServer.start`` (EtcdNotInstalled, EtcdStartError
with the tail of its log).
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

from magnetar.metadata.etcd_server import EtcdServer

from .lifetime import dying_with_parent


def start_etcd(directory: Path, *, host: str = "127.0.0.1", die_with_parent: bool = False) -> EtcdServer:
    """A started etcd on ``host`` keeping its files under ``directory``;
    with ``die_with_parent`` the kernel kills it when its starter dies."""
    launcher = dying_with_parent([]) if die_with_parent else None
    return EtcdServer(Path(directory), host=host, launcher=launcher).start()


@contextlib.contextmanager
def running_etcd(directory: Path, **options) -> Iterator[EtcdServer]:
    """:func:`start_etcd`, stopped at the end of the block."""
    server = start_etcd(directory, **options)
    try:
        yield server
    finally:
        server.stop()

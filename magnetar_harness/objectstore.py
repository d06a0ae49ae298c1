"""A SeaweedFS S3 endpoint of its own, for an object storage test or run.

The server itself is the product's
:class:`~magnetar.objectstore.seaweed.SeaweedServer` (``magnetar cluster up
--storage object`` runs the same one): the ``weed`` binary the ``cluster``
extra installs, every port chosen free, waited for until its bucket answers;
``stop``, ``kill``, ``pause``/``resume``. This module only starts it the
harness's way.

Failure modes: those of ``SeaweedServer.start`` (SeaweedNotInstalled,
SeaweedStartError with the tail of its log).
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

from magnetar.objectstore.seaweed import SeaweedServer

from .lifetime import dying_with_parent


def start_seaweed(directory: Path, *, bucket: str = "magnetar", host: str = "127.0.0.1",
                  avoid_ports: set[int] | frozenset[int] = frozenset(),
                  die_with_parent: bool = False) -> SeaweedServer:
    """A started SeaweedFS on ``host`` keeping its files under ``directory``,
    ``bucket`` created; with ``die_with_parent`` the kernel kills it when its
    starter dies."""
    launcher = dying_with_parent([]) if die_with_parent else None
    return SeaweedServer(Path(directory), bucket=bucket, host=host, launcher=launcher,
                         avoid_ports=avoid_ports).start()


@contextlib.contextmanager
def running_seaweed(directory: Path, **options) -> Iterator[SeaweedServer]:
    """:func:`start_seaweed`, stopped at the end of the block."""
    server = start_seaweed(directory, **options)
    try:
        yield server
    finally:
        server.stop()

"""Storage profiles: how long a ledger's batches may wait to be gathered
with others into one commit object, and when the next commit is due.

- ``latency``: not at all. A commit begins as soon as a batch is queued,
  the pipeline has room and the PUT budget a token; batches queued while
  it waits (for room, for a token) join it, so commits grow under load.
- ``cost``: up to ``interval`` after the batch arrived (250 ms by default:
  at most 4 commits a second while only such batches come), or sooner when
  a commit goes anyway (a ``latency`` batch, the size bound): every queued
  batch rides along with whatever commit begins.

A namespace chooses its profile (policy ``storage_profile``); the broker's
``object_storage_profile`` applies where none is set. A switch takes effect
for the batches that arrive after it; those already queued keep their
deadline (a ``latency`` batch after a switch to it sends them at once).

:class:`Gathering` keeps, per gather time in use, the arrival of the oldest
queued batch: the next commit is due at the earliest of ``arrival +
gather``. O(1) per batch (a dict of one or two entries). No I/O.
"""
from __future__ import annotations

from ..config import STORAGE_PROFILES as PROFILES  # the settings check them too
DEFAULT_PROFILE = "latency"


def check_profile(name: object) -> str:
    """The profile's name, or ValueError naming the choices."""
    if name not in PROFILES:
        raise ValueError(f"storage profile must be one of {', '.join(PROFILES)}, got {name!r}")
    return name  # type: ignore[return-value]


def gather_s(profile: str, cost_interval_s: float) -> float:
    """How long a batch of ``profile`` may wait for others."""
    return cost_interval_s if check_profile(profile) == "cost" else 0.0


class Gathering:
    """The queued batches' deadlines (see the module docstring)."""

    __slots__ = ("_oldest",)

    def __init__(self) -> None:
        self._oldest: dict[float, float] = {}  # gather seconds -> arrival of the oldest batch queued with it

    def arrived(self, gather: float, now: float) -> bool:
        """Note a batch; True if it may make the next commit due sooner
        (the first batch queued with its gather time)."""
        if gather in self._oldest:
            return False
        self._oldest[gather] = now
        return True

    def due(self) -> float:
        """When the next commit may begin (monotonic seconds; inf: nothing queued)."""
        return min((at + gather for gather, at in self._oldest.items()), default=float("inf"))

    def oldest(self) -> float:
        """Arrival of the oldest queued batch (inf: none)."""
        return min(self._oldest.values(), default=float("inf"))

    def clear(self) -> None:
        """The queue was taken by a commit."""
        self._oldest.clear()

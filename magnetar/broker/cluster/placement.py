"""Choosing the broker for an unowned bundle: the least loaded live broker.

Load here is the number of bundles a broker holds in the channel (owned, or
being assigned to it), plus the assignments this broker is writing right now
(``pending``: a client looks up all partitions of a topic at once, and those
lookups must not all see the same empty table). Ties go by rendezvous hashing
of (bundle, broker), so two brokers choosing at the same moment usually agree
(the channel's compare-and-set settles it anyway).
The load manager (reported CPU and rates) refines this later.
"""
from __future__ import annotations

from collections import Counter

from .bundles import Bundle, topic_hash
from .channel import Channel


def least_loaded(bundle: Bundle, live: list[str], channel: Channel, exclude: set[str] = frozenset(),
                 pending: Counter | None = None) -> str | None:
    """The broker to assign ``bundle`` to, or None when no broker is live."""
    candidates = [b for b in live if b not in exclude]
    if not candidates:
        return None
    held: Counter = Counter()
    for b in candidates:
        held[b] = len(channel.held_by(b)) + (pending[b] if pending else 0)
    return min(candidates, key=lambda b: (held[b], topic_hash(f"{bundle}@{b}")))

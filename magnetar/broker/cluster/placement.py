"""Choosing the broker for an unowned bundle: the least loaded live broker.

Load here is the number of bundles a broker holds in the channel (owned, or
being assigned to it): exact, known to every broker without waiting for a
load report, and what spreads a namespace's bundles evenly. Ties go to the
broker whose id hashes nearest the bundle, so two brokers choosing at the same
moment usually agree (the channel's compare-and-set settles it anyway).
The load manager (reported CPU and rates) refines this later.
"""
from __future__ import annotations

from collections import Counter

from .bundles import Bundle, topic_hash
from .channel import Channel


def least_loaded(bundle: Bundle, live: list[str], channel: Channel, exclude: set[str] = frozenset()) -> str | None:
    """The broker to assign ``bundle`` to, or None when no broker is live."""
    candidates = [b for b in live if b not in exclude]
    if not candidates:
        return None
    held: Counter = Counter()
    for b in candidates:
        held[b] = len(channel.held_by(b))
    key = topic_hash(str(bundle))
    return min(candidates, key=lambda b: (held[b], (topic_hash(b) - key) % (1 << 32)))

"""The shedder's decision: which bundle to move from the busiest broker to the
idlest one, if any. A pure function, so every rule is testable on its own.

Load is a broker's message rate in (msg/s, from its load report). A move is
planned when the busiest broker's load exceeds the idlest's by more than
``threshold`` of the busiest's (after ``cycles`` consecutive rounds, counted by
the caller), never takes a broker's last bundle, never involves a broker
moved within the cool-down (the caller passes those in ``cooling``), and
picks the bundle whose rate is nearest half the gap (among those below the
gap: moving it narrows the gap), which brings the two brokers nearest each
other. A move is made only if it lowers the busier of the two by at least
half the threshold (of the busiest's load): a bundle about as hot as the gap
would only swap which broker is busy, and the shedder would chase it back and
forth; with this rule it stops once no move helps (three brokers with four
equal bundles settle at 2-1-1). Like Pulsar's TransferShedder, the destination is chosen here.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BundleMove:
    bundle: str
    source: str
    destination: str
    reason: str


def plan(loads: dict[str, float], bundle_rates: dict[str, dict[str, float]], threshold: float,
         cooling: set[str] = frozenset()) -> BundleMove | None:
    """``loads``: broker -> msg/s; ``bundle_rates``: broker -> {bundle: msg/s} of
    the bundles it owns. None when the spread is within ``threshold``."""
    candidates = {b: l for b, l in loads.items() if b not in cooling}
    if len(candidates) < 2:
        return None
    busiest = max(candidates, key=lambda b: (candidates[b], b))
    idlest = min(candidates, key=lambda b: (candidates[b], b))
    high, low = candidates[busiest], candidates[idlest]
    if high <= 0 or high - low <= threshold * high:
        return None
    owned = bundle_rates.get(busiest, {})
    if len(owned) < 2:
        return None  # never a broker's last bundle
    gap = high - low
    worth = high * (1 - threshold / 2)
    movable = [(abs(rate - gap / 2), bundle, rate) for bundle, rate in owned.items()
               if 0 < rate and max(high - rate, low + rate) <= worth]
    if not movable:
        return None
    _, bundle, rate = min(movable)
    return BundleMove(bundle, busiest, idlest,
                f"{busiest} at {high:.0f} msg/s, {idlest} at {low:.0f} msg/s; moving {bundle} ({rate:.0f} msg/s)")

"""Draining a broker: moving every bundle it owns to the others before it stops.

A clean stop (SIGTERM, ``POST /admin/v2/brokers/shutdown``) and ``POST
/admin/v2/brokers/drain`` call :func:`drain`. It marks the broker
``draining`` in its registry record, so that no broker gives it a bundle
(lookups, the leader's sweep and shedder skip it), then moves each bundle it
owns with a PIP-307 transfer (:meth:`.member.ClusterMember.unload`): the
clients are told the new owner and reconnect there without a lookup. The
destinations are chosen as the load manager ranks brokers (:func:`plan`).
Bundles that reach it meanwhile (a lookup that had not yet seen the mark)
are moved on in the next round.

Failure modes: a move that fails or does not finish in ``move_timeout_s``
is left to the stop's release (Owned -> Releasing -> Free: its clients are
disconnected and look the topic up, as before drains existed); with no other
broker to move to, every bundle is. The whole drain ends by ``timeout_s``.
A drain never raises for a bundle's sake; it returns what it did. It
raises (TimeoutError, MetadataError) only when the draining mark cannot be
written, before anything moved.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from .bundles import Bundle
from .channel import ASSIGNING, OWNED
from .load_report import message_load

log = logging.getLogger(__name__)

#: Moves under way at once during a drain.
CONCURRENCY = 8
#: How long the draining mark may take to write (the metadata store may be out of reach).
MARK_TIMEOUT_S = 5.0


@dataclass
class DrainResult:
    #: bundle -> the broker that owns it now.
    moved: dict[str, str] = field(default_factory=dict)
    #: bundle -> why it was not moved (the stop releases it the old way).
    failed: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    def doc(self) -> dict:
        return {"moved": self.moved, "failed": self.failed, "seconds": round(self.seconds, 3)}


def plan(bundles: dict[Bundle, float], loads: dict[str, float], held: dict[str, int]) -> dict[Bundle, str]:
    """Where each of ``bundles`` (bundle -> its msg/s) goes, among the brokers
    of ``loads`` (broker -> its reported msg/s) holding ``held`` bundles each.

    The heaviest bundle first, each to the broker with the least load so far
    (its report plus what this plan gave it), then the fewest bundles, then
    the name: an idle cluster gets the bundles spread evenly, a busy one gets
    them where the load manager would put them. Empty when ``loads`` is.
    """
    if not loads:
        return {}
    load = dict(loads)
    count = {b: held.get(b, 0) for b in loads}
    out: dict[Bundle, str] = {}
    for bundle, rate in sorted(bundles.items(), key=lambda kv: (-kv[1], str(kv[0]))):
        target = min(load, key=lambda b: (load[b], count[b], b))
        out[bundle] = target
        load[target] += rate
        count[target] += 1
    return out


async def drain(member, timeout_s: float = 20.0, move_timeout_s: float = 10.0) -> DrainResult:
    """Move every bundle ``member`` (a :class:`.member.ClusterMember`, which
    calls this) owns to the other brokers (see the module docstring);
    returns once none is left, or at ``timeout_s``."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    deadline = started + timeout_s
    result = DrainResult()
    me = member.broker_id
    # Bounded: with the metadata store out of reach the stop goes on without a drain.
    await asyncio.wait_for(member.mark_draining(True), min(MARK_TIMEOUT_S, timeout_s))
    given_up: set[Bundle] = set()
    gate = asyncio.Semaphore(CONCURRENCY)

    async def move(bundle: Bundle, destination: str) -> None:
        async with gate:
            remaining = deadline - loop.time()
            if remaining <= 0:
                result.failed[str(bundle)] = "the drain ran out of time"
                given_up.add(bundle)
                return
            try:
                owner = await member.unload(bundle, destination, timeout=min(move_timeout_s, remaining))
                result.moved[str(bundle)] = owner
            except Exception as exc:  # noqa: BLE001  (each bundle's failure is reported, not raised)
                reason = str(exc) or type(exc).__name__
                log.warning("drain: cannot move bundle %s to %s (%s): the stop releases it instead",
                            bundle, destination, reason)
                result.failed[str(bundle)] = reason
                given_up.add(bundle)

    while member.serving and loop.time() < deadline:
        owned = [b for b in member.channel.owned_by(me) if b not in given_up]
        arriving = [b for b, s in member.channel.table.items() if s.state == ASSIGNING and s.broker == me]
        if not owned:
            if not arriving:
                break
            await asyncio.sleep(0.05)  # let them land, then move them on
            continue
        others = [b for b in member.registry.candidates() if b != me]
        if not others:
            for bundle in owned:
                result.failed[str(bundle)] = "no other broker takes bundles"
                given_up.add(bundle)
            break
        rates = member.info.load.get("bundles", {})
        loads = {b: message_load(member.registry.live[b].load) for b in others}
        held = {b: len(member.channel.held_by(b)) for b in others}
        destinations = plan({b: float(rates.get(str(b), 0.0)) for b in owned}, loads, held)
        await asyncio.gather(*(move(b, d) for b, d in destinations.items()))
    for bundle in member.channel.owned_by(me):
        if str(bundle) not in result.failed and member.channel.get(bundle).state == OWNED:
            result.failed[str(bundle)] = "the drain ran out of time"
    # The clients of moved topics are told where to go by hand-overs that run
    # after the destination took the bundle; the stop must not cut them off.
    try:
        await asyncio.wait_for(member.host.handed_over(), max(1.0, deadline - loop.time()))
    except asyncio.TimeoutError:
        log.warning("drain: hand-overs still running at the deadline")
    result.seconds = loop.time() - started
    log.info("drain of %s: %d bundles moved, %d left to release, in %.2f s", me, len(result.moved),
             len(result.failed), result.seconds)
    return result

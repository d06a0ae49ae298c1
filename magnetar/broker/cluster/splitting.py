"""Splitting a bundle in two, while its owner keeps serving it.

Any broker may ask (the admin API, or the leader's automatic split): it
writes ``Owned(o) -> Splitting(o)`` with the hash to cut at (:func:`request`).
The owner ``o`` sees it and does the split (:func:`carry_out`):

1. each half goes ``Init -> Assigning(o) -> Owned(o)``: the halves are the
   owner's before any broker can place a topic in them;
2. the namespace's layout (:mod:`.layout`) gets the halves instead of the
   bundle (compare-and-set);
3. the bundle goes ``Splitting -> Deleted``.

The owner's loaded topics stay loaded and their clients connected: they were
in the bundle and are now in a half the same broker owns. A topic first used
during the split waits for it like any lookup of a bundle in transition. A
broker whose layout copy is late still places a topic in the old bundle,
finds it Deleted and reads the layout again (:meth:`.member.ClusterMember.lookup`).

Failure modes: an owner that cannot finish (a half held by another broker, a
metadata error) puts the bundle back to Owned by itself and logs why; the
requester then gets RuntimeError. An owner that dies mid-split is cleaned up
by the leader (:meth:`.leader.Leader.sweep`): Deleted if the layout already
has the halves, else Free; one back within its session (the leader never
saw it leave) carries the split out itself when it joins
(:meth:`.member.ClusterMember._join`).
"""
from __future__ import annotations

import logging

from .bundles import Bundle
from .channel import ASSIGNING, DELETED, FREE, INIT, OWNED, SPLITTING, BundleState, Channel
from .layout import Layouts

log = logging.getLogger(__name__)

#: How long the owner waits for each half to become its own.
HALF_TIMEOUT_S = 10.0


async def request(channel: Channel, layouts: Layouts, bundle: Bundle, at: int,
                  timeout: float = 30.0) -> list[Bundle]:
    """Ask ``bundle``'s owner to cut it at ``at``; the namespace's bundles once done.

    ValueError if ``bundle`` is not an owned bundle of the layout or ``at`` is
    not inside it; LostRace if its state changed meanwhile; RuntimeError if
    the owner gave up; TimeoutError after ``timeout``.
    """
    halves = bundle.split(at)
    if bundle not in layouts.bundles(bundle.namespace):
        raise ValueError(f"{bundle.namespace} has no bundle {bundle.range}")
    state = channel.get(bundle)
    if state.state != OWNED:
        raise ValueError(f"bundle {bundle} is {state.state}, not owned: it cannot be split now")
    await channel.transition(bundle, SPLITTING, state.broker, state.broker, expected=state, split_at=at)
    done = await channel.wait_for(bundle, lambda s: s.state in (DELETED, OWNED, FREE), timeout)
    if done.state != DELETED:
        raise RuntimeError(f"the owner of bundle {bundle} could not split it (see {state.broker}'s log)")
    log.info("bundle %s split into %s and %s", bundle, halves[0].range, halves[1].range)
    return await layouts.load(bundle.namespace)


async def carry_out(channel: Channel, layouts: Layouts, me: str, bundle: Bundle, state: BundleState) -> None:
    """The owner's side of a split (``state`` is the Splitting record naming ``me``)."""
    try:
        halves = bundle.split(state.split_at if state.split_at is not None else -1)
        for half in halves:
            await _take_half(channel, me, half)
        try:
            await layouts.replace(bundle, halves)
        except ValueError:
            pass  # the layout has the halves already (an earlier attempt got this far)
        await channel.transition(bundle, DELETED, me, me, expected=channel.get(bundle))
    except Exception as exc:
        log.warning("cannot split bundle %s: %s; it stays whole", bundle, exc)
        current = channel.get(bundle)
        if current.state == SPLITTING and current.broker == me:
            try:
                await channel.override(bundle, OWNED, me, None, current)
            except Exception as again:  # the leader cleans up if we cannot
                log.warning("cannot put bundle %s back to Owned: %s", bundle, again)


async def _take_half(channel: Channel, me: str, half: Bundle) -> None:
    current = channel.get(half)
    if current.state == OWNED and current.broker == me:
        return
    if current.state == ASSIGNING and current.broker == me:
        # Assigned to us by an earlier attempt (a previous life of this
        # broker, which died mid-split): our listener or join takes it.
        await channel.wait_for(half, lambda s: s.state == OWNED and s.broker == me, HALF_TIMEOUT_S)
        return
    if current.state not in (INIT, FREE):
        raise ValueError(f"its half {half.range} is {current.state} on {current.broker}")
    # This broker's own listener takes a bundle assigned to it (Assigning -> Owned).
    await channel.transition(half, ASSIGNING, me, me, expected=current)
    await channel.wait_for(half, lambda s: s.state == OWNED and s.broker == me, HALF_TIMEOUT_S)


async def clean_up_after(channel: Channel, layouts: Layouts, bundle: Bundle, state: BundleState) -> str:
    """The leader's cleanup of a split whose owner is gone; the state written."""
    halves_in_layout = bundle not in await layouts.load(bundle.namespace)
    to = DELETED if halves_in_layout else FREE
    await channel.override(bundle, to, None, state.broker, state)
    return to


async def is_orphan(layouts: Layouts, bundle: Bundle) -> bool:
    """A record for a range that is not in the layout (read afresh): a half
    taken by a split whose owner died before it finished."""
    return bundle not in await layouts.load(bundle.namespace)


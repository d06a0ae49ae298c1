"""The leader broker: reassigns the bundles of brokers that are gone.

One broker of the cluster wins the election on ``/loadbalance/leader``
(ephemeral, so a dead leader is replaced within a session TTL). While it
leads, it sweeps the channel whenever a broker leaves, whenever a bundle's
state changes, and every ``sweep_interval_s``: a bundle that is Assigning,
Owned or Releasing on a broker that is no longer live is overridden to
Assigning on the least loaded live broker (``source`` = the dead broker),
which then takes it. A bundle Assigning or Releasing on live brokers that
has not moved on for ``inflight_timeout_s`` (a step lost: Pulsar's in-flight
state timeout) is assigned again the same way, an Assigning one to another
broker: the live broker retries its own failed steps, so this is the net
under that.

It also runs the shedder (:mod:`.shedder`): from the brokers' load reports,
it moves a bundle from the busiest broker to the idlest when the spread
stays above the threshold for a few rounds (a move without lookups,
PIP-307), and splits a bundle whose topic count or message rate passed its
limit (:class:`SplitSettings`, Pulsar's automatic bundle split). It also
finishes splits whose owner died (:mod:`.splitting`). A lease-based leader
can be wrong for a moment after a pause; that is safe because every channel
write is a compare-and-set and storage fences the previous owner's ledgers.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from magnetar.metadata import MetadataStore, MetadataSession
from magnetar.metadata.election import LeaderElection
from magnetar.metadata.store import SessionExpired

from . import splitting
from .channel import ASSIGNING, FREE, OWNED, RELEASING, SPLITTING, Channel, LostRace
from .bundles import RANGE_EQUALLY_DIVIDE, Bundle, parse_range, split_point
from .layout import Layouts
from .load_report import message_load
from .placement import least_loaded
from .registry import Registry
from .shedder import BundleMove, plan

log = logging.getLogger(__name__)

PATH = "/loadbalance/leader"

#: How long a bundle may stay Assigning or Releasing on live brokers before
#: the leader assigns it again (Pulsar waits 30 s for an in-flight state too).
INFLIGHT_TIMEOUT_S = 30.0


async def current_leader(store: MetadataStore) -> str | None:
    record = await store.get(PATH)
    return None if record is None else record.value.decode()


@dataclass(frozen=True)
class SheddingSettings:
    enabled: bool = True
    interval_s: float = 10.0
    threshold: float = 0.5
    cycles: int = 3
    cooldown_s: float = 60.0


@dataclass(frozen=True)
class SplitSettings:
    """Pulsar's automatic bundle split: a bundle with more topics or a higher
    message rate in than these is cut in two by range, until its namespace
    has ``max_bundles``."""
    enabled: bool = True
    max_topics: int = 1000
    max_msg_rate: float = 30000.0
    max_bundles: int = 128


class Leader:
    def __init__(self, broker_id: str, store: MetadataStore, session: MetadataSession, channel: Channel,
                 registry: Registry, sweep_interval_s: float = 2.0, shedding: SheddingSettings | None = None,
                 layouts: Layouts | None = None, auto_split: SplitSettings | None = None,
                 inflight_timeout_s: float = INFLIGHT_TIMEOUT_S) -> None:
        self.broker_id = broker_id
        self.channel = channel
        self.registry = registry
        self.sweep_interval_s = sweep_interval_s
        self.inflight_timeout_s = inflight_timeout_s
        #: Bundles seen Assigning or Releasing on live brokers: the version seen and since when (monotonic).
        self._inflight: dict = {}
        self.election = LeaderElection(store, PATH, broker_id.encode(), session, retry_s=0.5)
        self.shedding = shedding
        self.layouts = layouts
        self.auto_split = auto_split
        #: Splits the leader asked for (for metrics and tests).
        self.splits: list[str] = []
        self._streak = 0
        self._last_shed = 0.0
        self._moved_at: dict[str, float] = {}
        #: Moves the shedder made (for metrics and tests).
        self.moves: list[BundleMove] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._stopping = False
        channel.add_listener(lambda *_: self._wake.set())
        registry.add_listener(lambda *_: self._wake.set())

    @property
    def is_leader(self) -> bool:
        return self.election.is_leader

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        self._stopping = True
        task = self._task
        # Cancel until it ends: Python 3.11's wait_for can swallow a
        # cancellation that races with the awaited event (the election's
        # wait for the leader key's deletion).
        while task is not None and not task.done():
            task.cancel()
            await asyncio.wait([task], timeout=0.1)
        if self.election.is_leader:
            try:
                await self.election.release()
            except Exception:
                pass

    async def _run(self) -> None:
        try:
            await self.election.acquire()
        except SessionExpired:
            return
        if self._stopping:
            return
        log.info("broker %s is the leader", self.broker_id)
        while self.election.is_leader and not self._stopping:
            try:
                await self.sweep()
                await self._maybe_shed()
                await self.split_oversized()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("leader sweep failed")
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), self.sweep_interval_s)
            except asyncio.TimeoutError:
                pass
        log.info("broker %s is no longer the leader", self.broker_id)

    async def _maybe_shed(self) -> None:
        settings = self.shedding
        now = asyncio.get_running_loop().time()
        if settings is None or not settings.enabled or now - self._last_shed < settings.interval_s:
            return
        self._last_shed = now
        await self.shed(now)

    async def shed(self, now: float) -> BundleMove | None:
        """One round of the shedder (see :mod:`.shedder`); returns the move made."""
        settings = self.shedding
        loads, rates = {}, {}
        for broker, info in self.registry.live.items():
            loads[broker] = message_load(info.load)
            owned = {str(b) for b in self.channel.owned_by(broker)}
            rates[broker] = {k: float(r) for k, r in info.load.get("bundles", {}).items() if k in owned}
        cooling = {b for b, t in self._moved_at.items() if now - t < settings.cooldown_s}
        cooling |= {b for b, info in self.registry.live.items() if info.draining}  # its drain moves its bundles
        move = plan(loads, rates, settings.threshold, cooling)
        if move is None:
            self._streak = 0
            return None
        self._streak += 1
        if self._streak < settings.cycles:
            return None
        self._streak = 0
        namespace, _, rng = move.bundle.rpartition("/")
        try:
            bundle: Bundle = parse_range(namespace, rng)
        except ValueError:
            return None
        state = self.channel.get(bundle)
        if state.state != OWNED or state.broker != move.source:
            return None
        try:
            await self.channel.transition(bundle, RELEASING, move.destination, move.source, expected=state)
        except LostRace:
            return None
        self._moved_at[move.source] = self._moved_at[move.destination] = now
        self.moves.append(move)
        log.info("shedder: %s", move.reason)
        return move

    async def split_oversized(self) -> list[str]:
        """Split every owned bundle whose last load report passed a limit; the
        bundles split (one per namespace per round: the next report tells
        whether the halves are still too big)."""
        settings, layouts = self.auto_split, self.layouts
        if settings is None or not settings.enabled or layouts is None:
            return []
        done: list[str] = []
        for broker, info in list(self.registry.live.items()):
            rates, topics = info.load.get("bundles", {}), info.load.get("bundle_topics", {})
            for bundle in self.channel.owned_by(broker):
                key = str(bundle)
                if bundle.namespace in {d.rpartition("/")[0] for d in done}:
                    continue
                over = topics.get(key, 0) > settings.max_topics or rates.get(key, 0.0) > settings.max_msg_rate
                if not over or len(layouts.bundles(bundle.namespace)) >= settings.max_bundles:
                    continue
                try:
                    at = split_point(bundle, RANGE_EQUALLY_DIVIDE)
                    state = self.channel.get(bundle)
                    await self.channel.transition(bundle, SPLITTING, state.broker, state.broker, expected=state,
                                                  split_at=at)
                except (ValueError, LostRace) as exc:
                    log.info("cannot split bundle %s now: %s", bundle, exc)
                    continue
                log.info("splitting bundle %s: %d topics, %.0f msg/s in", bundle, topics.get(key, 0),
                         rates.get(key, 0.0))
                done.append(key)
        self.splits.extend(done)
        return done

    async def sweep(self) -> int:
        """Reassign every bundle held by a broker that is gone, and finish the
        splits of owners that died; returns how many bundles changed."""
        live = self.registry.candidates()  # a draining broker is live but takes nothing
        moved = 0
        for bundle, state in list(self.channel.table.items()):
            if self.layouts is not None and state.broker not in self.registry.live:
                try:
                    if state.state == SPLITTING:
                        to = await splitting.clean_up_after(self.channel, self.layouts, bundle, state)
                        log.info("split of bundle %s by gone broker %s: %s", bundle, state.broker, to)
                        moved += 1
                        continue
                    if state.state in (ASSIGNING, OWNED) and await splitting.is_orphan(self.layouts, bundle):
                        await self.channel.override(bundle, FREE, None, state.broker, state)
                        moved += 1
                        continue
                except LostRace:
                    continue
            if state.state == RELEASING and state.source not in self.registry.live:
                # The source died mid-move: nobody will pass the bundle on.
                target = state.broker if state.broker in self.registry.live else \
                    least_loaded(bundle, live, self.channel)
                if target is None:
                    return moved
                try:
                    await self.channel.override(bundle, ASSIGNING, target, state.source, state)
                    moved += 1
                except LostRace:
                    pass
                continue
            if state.state in (ASSIGNING, RELEASING) and state.broker in self.registry.live:
                moved += await self._unstick(bundle, state, live)
                continue
            if state.state not in (ASSIGNING, OWNED, RELEASING) or state.broker in self.registry.live:
                continue
            target = least_loaded(bundle, live, self.channel)
            if target is None:
                return moved
            try:
                await self.channel.override(bundle, ASSIGNING, target, state.broker, state)
            except LostRace:
                continue
            moved += 1
            log.info("bundle %s of gone broker %s reassigned to %s", bundle, state.broker, target)
        for bundle in [b for b in self._inflight if self.channel.get(b).state not in (ASSIGNING, RELEASING)]:
            del self._inflight[bundle]
        return moved

    async def _unstick(self, bundle, state, live) -> int:
        """Assign ``bundle`` again if it has been in ``state`` (Assigning or
        Releasing, its brokers live) for ``inflight_timeout_s``: 1 if it was."""
        now = time.monotonic()
        seen = self._inflight.get(bundle)
        if seen is None or seen[0] != state.version:
            self._inflight[bundle] = (state.version, now)
            return 0
        if now - seen[1] < self.inflight_timeout_s:
            return 0
        if state.state == ASSIGNING:  # its take was lost: another broker, if there is one
            target = least_loaded(bundle, live, self.channel, exclude={state.broker}) or \
                (state.broker if state.broker in live else None)
        else:  # its source did not pass it on: to the destination it named
            target = state.broker if state.broker in live else least_loaded(bundle, live, self.channel)
        if target is None:
            return 0
        try:
            await self.channel.override(bundle, ASSIGNING, target, state.source, state)
        except LostRace:
            return 0
        log.warning("bundle %s was %s on live broker %s for %.0f s: assigned again to %s", bundle, state.state,
                    state.broker if state.state == ASSIGNING else state.source, now - seen[1], target)
        del self._inflight[bundle]
        return 1

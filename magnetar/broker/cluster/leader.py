"""The leader broker: reassigns the bundles of brokers that are gone.

One broker of the cluster wins the election on ``/loadbalance/leader``
(ephemeral, so a dead leader is replaced within a session TTL). While it
leads, it sweeps the channel whenever a broker leaves, whenever a bundle's
state changes, and every ``sweep_interval_s``: a bundle that is Assigning,
Owned or Releasing on a broker that is no longer live is overridden to
Assigning on the least loaded live broker (``source`` = the dead broker),
which then takes it. A lease-based leader can be wrong for a moment after a
pause; that is safe because every channel write is a compare-and-set and
storage fences the previous owner's ledgers.
"""
from __future__ import annotations

import asyncio
import logging

from magnetar.metadata import MetadataStore, Session
from magnetar.metadata.election import LeaderElection
from magnetar.metadata.store import SessionExpired

from .channel import ASSIGNING, OWNED, RELEASING, Channel, LostRace
from .placement import least_loaded
from .registry import Registry

log = logging.getLogger(__name__)

PATH = "/loadbalance/leader"


async def current_leader(store: MetadataStore) -> str | None:
    record = await store.get(PATH)
    return None if record is None else record.value.decode()


class Leader:
    def __init__(self, broker_id: str, store: MetadataStore, session: Session, channel: Channel,
                 registry: Registry, sweep_interval_s: float = 2.0) -> None:
        self.broker_id = broker_id
        self.channel = channel
        self.registry = registry
        self.sweep_interval_s = sweep_interval_s
        self.election = LeaderElection(store, PATH, broker_id.encode(), session, retry_s=0.5)
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

    async def sweep(self) -> int:
        """Reassign every bundle held by a broker that is gone; returns how many moved."""
        live = sorted(self.registry.live)
        moved = 0
        for bundle, state in list(self.channel.table.items()):
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
        return moved

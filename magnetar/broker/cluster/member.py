"""This broker's part in the cluster: lookups, taking and giving up bundles.

:class:`ClusterMember` joins the cluster (a session, its registry record, the
channel and the leader election), and then:

- answers lookups (:meth:`lookup`): the owner of the topic's bundle; an
  unowned bundle is first assigned to the least loaded live broker; a bundle
  in transition (Assigning, Releasing, or owned by a broker that is gone) is
  answered once it is Owned again, or ServiceNotReady after
  ``lookup_timeout_s`` (5 s: well inside a client's share of its operation
  timeout, so the client hears "try again" and retries, rather than giving up
  on this broker; see :func:`in_flight_message`);
- takes the bundles assigned to it (Assigning -> Owned), and on joining
  passes on the bundles a previous life of it was releasing, and carries
  out the splits it was asked to do, when it died (see :meth:`_join`);
- gives up a bundle the moment the channel says someone else has it, or the
  moment its session is lost: its host's ``unload_bundle`` / ``unload_all``
  close the topics, so their clients reconnect and look up.
  After a lost session it joins again with a new one;
- moves a bundle it owns to another broker without client lookups (PIP-307,
  :meth:`unload`): Releasing(src -> dst) makes the source release the
  bundle's topics (appends stop, ledgers close, cursors persist, clients
  stay connected and held); Assigning(dst, the released topics' names)
  makes the destination load those topics, then take the bundle:
  Owned(dst); then the source hands its clients over with the destination's
  URL, and they find their topics ready (the host's ``release_bundle`` /
  ``prepare_bundle`` / ``hand_over_bundle``). With
  ``multi_phase`` off, the source disconnects its clients at once instead and
  they look the topics up (the old unload);
- splits a bundle in two (:meth:`split`, :mod:`.splitting`), keeping both
  halves and their clients;
- drains (:meth:`drain`, :mod:`.drain`): moves every bundle it owns to the
  others without client lookups, marked ``draining`` so none comes back;
  a clean stop drains first when ``drain_on_stop`` is set;
- on a clean stop, frees the bundles still its own (Owned -> Releasing ->
  Free) so others take them without waiting for the session to expire.

The member reaches the broker service only through :class:`.host.BundleHost`
(given at construction); the service reaches the member directly (it is
below it).

Failure modes: metadata errors during a lookup surface as ServiceNotReady
(retryable); a lost race on the channel is retried within the deadline. A
step this broker owes a bundle (taking it, passing it on) that fails in the
store is tried again until it is written or moot: nobody else takes it for
a live broker, short of the leader's in-flight timeout (:mod:`.leader`).
"""
from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import dataclass, field

from magnetar.broker.durations import DurationCounts
from magnetar.broker.errors import OwnedElsewhere, ServiceNotReady
from magnetar.broker.topic_name import TopicName
from magnetar.metadata import MetadataStore, MetadataSession

from . import drain as draining
from . import splitting
from .bundles import DEFAULT_BUNDLES, Bundle
from .channel import ASSIGNING, DELETED, FREE, INIT, OWNED, RELEASING, SPLITTING, BundleState, Channel, \
    IllegalTransition, LostRace, key_of
from .host import BundleHost
from .layout import Layouts
from ..topics.moving import MovingTopic
from .load_report import BundleCounters, LoadSampler, count_by_bundle
from .leader import Leader, SheddingSettings, SplitSettings
from .placement import least_loaded
from .registry import BrokerInfo, Registry

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LookupResult:
    broker_id: str
    service_url: str
    web_service_url: str
    #: True when this broker is the owner.
    local: bool
    #: The owner's advertised listeners (name -> URL).
    listeners: dict = field(default_factory=dict)
    #: The owner's pulsar+ssl and https URLs ("" without TLS listeners).
    service_url_tls: str = ""
    web_service_url_tls: str = ""


#: How long each metadata step of a clean stop may take before it is given up.
CLOSE_STEP_S = 5.0
#: A bundle step that failed in the store (taking it, passing it on) is tried
#: again after this, doubling up to STEP_RETRY_MAX_S.
STEP_RETRY_FIRST_S = 0.2
STEP_RETRY_MAX_S = 2.0
#: How long a lookup waits for a bundle in transition before it answers
#: ServiceNotReady. Clients give a service host a share of their operation
#: timeout (Magnetar's: 30 s over the hosts not yet tried, 10 s each of 3;
#: the official C++ client: a request's whole 30 s), and a lookup answered
#: after that share is lost: the client gives up on this broker. Answering
#: "try again" well inside it lets the client retry.
LOOKUP_TIMEOUT_S = 5.0


def in_flight_message(bundle: Bundle, state: BundleState, waited_s: float) -> str:
    """The ServiceNotReady text for a lookup of a bundle still in transition.

    The official C++ client retries a lookup answered ServiceNotReady within
    its operation timeout, but also closes its connection to the broker
    (every producer and consumer on it reconnects) unless the text holds
    one of Pulsar's phrases for a bundle on the move: "is being unloaded",
    "Failed to acquire ownership". The text says which, truthfully: a
    Releasing bundle is being unloaded; any other is not yet owned for the
    lookup."""
    where = f"{state.state} on {state.broker}" if state.broker else state.state
    if state.state == RELEASING:
        return f"Namespace bundle {bundle} is being unloaded ({where}): try again"
    return f"Failed to acquire ownership for bundle {bundle} within {waited_s:g} s ({where}): try again"


async def _bounded(step, what: str) -> None:
    try:
        await asyncio.wait_for(step, CLOSE_STEP_S)
    except asyncio.TimeoutError:
        log.info("gave up %s on the way out: the metadata store did not answer in %.0f s", what, CLOSE_STEP_S)
    except Exception as exc:
        log.info("%s on the way out failed: %s", what, exc)


class ClusterMember:
    def __init__(self, store: MetadataStore, info: BrokerInfo, host: BundleHost, *,
                 multi_phase: bool = True,
                 report_interval_s: float = 5.0,
                 shedding: SheddingSettings | None = None,
                 auto_split: SplitSettings | None = None,
                 bundles_per_namespace: int = DEFAULT_BUNDLES,
                 session_ttl_s: float = 10.0, lookup_timeout_s: float = LOOKUP_TIMEOUT_S) -> None:
        self.store = store
        self.info = info
        self.broker_id = info.broker_id
        self.host = host
        #: Moves hand clients over (PIP-307); off: the source disconnects them.
        self.multi_phase = multi_phase
        self.report_interval_s = report_interval_s
        self.shedding = shedding
        self.auto_split = auto_split
        self._reporter: asyncio.Task | None = None
        #: When bundles moved here from another broker (event-loop time).
        self._arrivals: dict[Bundle, float] = {}
        self.bundles_per_namespace = bundles_per_namespace
        self.session_ttl_s = session_ttl_s
        self.lookup_timeout_s = lookup_timeout_s
        self.channel = Channel(store)
        self.layouts = Layouts(store, bundles_per_namespace)
        self.registry = Registry(store)
        self.session: MetadataSession | None = None
        #: Set by :meth:`close` when the metadata store did not answer (or our
        #: session had lapsed): the broker then stops as a crash would.
        self.store_unreachable = False
        self.leader: Leader | None = None
        #: Assignments this broker is writing now, by target broker (placement).
        self._pending: Counter = Counter()
        self.lookups_answered = 0
        self.lookup_redirects = 0
        #: Bundles this broker moved (admin unload, the shedder) and how long each took; bundles it split.
        self.transfers = DurationCounts()
        self.splits = 0
        self._tasks: set[asyncio.Task] = set()
        self._monitor: asyncio.Task | None = None
        self.closing = False
        #: Settings of the drain a clean stop runs (None: no drain).
        self.drain_on_stop: tuple[float, float] | None = None

    # -- joining and leaving ----------------------------------------------------------
    async def start(self) -> None:
        await self.registry.start()
        await self.layouts.start()
        await self.channel.start()
        self.channel.add_listener(self._on_bundle)
        await self._join()
        self._monitor = asyncio.get_running_loop().create_task(self._watch_session())
        self._reporter = asyncio.get_running_loop().create_task(self._report_load())

    async def _join(self) -> None:
        self.session = await self.store.create_session(self.session_ttl_s)
        await self.registry.register(self.info, self.session)
        self.leader = Leader(self.broker_id, self.store, self.session, self.channel, self.registry,
                             shedding=self.shedding, layouts=self.layouts, auto_split=self.auto_split)
        self.leader.start()
        for bundle, state in list(self.channel.table.items()):
            if state.state == ASSIGNING and state.broker == self.broker_id:  # assigned while we were away
                self._spawn(self._take(bundle, state))
            elif state.state == RELEASING and state.source == self.broker_id:
                # A handover a previous life of ours began and never finished
                # (killed, or its session lost, mid-move). Back within the
                # session TTL, our new registry record replaced the old one,
                # so the leader never saw us leave and will not pass the
                # bundle on: nobody would, and it would stay Releasing with
                # no owner for good. Nothing of it is loaded here now, so
                # releasing is a no-op and we pass it on to its destination
                # (a dead one is then the leader's to replace).
                log.info("bundle %s was being released to %s by a previous life of this broker: passing it on",
                         bundle, state.broker)
                self._spawn(self._release(bundle, state))
            elif state.state == SPLITTING and state.broker == self.broker_id:
                # Likewise a split a previous life of ours was asked to do:
                # the leader cleans up only after gone brokers. Finishing it
                # resumes where it stopped (or puts the bundle back whole).
                log.info("bundle %s was being split by a previous life of this broker: carrying it out", bundle)
                self._spawn(splitting.carry_out(self.channel, self.layouts, self.broker_id, bundle, state))

    async def _watch_session(self) -> None:
        """A lost session: stop serving at once, then join again."""
        while not self.closing:
            await asyncio.sleep(0.2)
            if self.session is not None and not self.session.alive and not self.closing:
                log.error("broker %s lost its metadata session: unloading every topic", self.broker_id)
                try:
                    await self.host.unload_all()
                except Exception:
                    log.exception("unloading after a lost session failed")
                if self.leader is not None:
                    await self.leader.stop()
                while not self.closing:
                    try:
                        # The channel first: while the store was out of reach
                        # the watch missed the takeover of our bundles, and
                        # the new session would have us serve them from the
                        # stale table (fencing the new owner's ledger and
                        # acknowledging writes its metadata then drops).
                        await self.channel.reload()
                        await self._join()
                        log.info("broker %s joined the cluster again", self.broker_id)
                        break
                    except Exception as exc:
                        log.warning("cannot join the cluster again (%s); retrying", exc)
                        await asyncio.sleep(1.0)

    async def _report_load(self) -> None:
        """Every ``report_interval_s``: this broker's load report (see
        :mod:`.load_report`) into its registry record, where the leader reads it."""
        sampler = LoadSampler()
        sampler.sample(await self.bundle_counters())
        while not self.closing:
            await asyncio.sleep(self.report_interval_s)
            self.info.load = sampler.sample(await self.bundle_counters())
            if self.session is None or not self.session.alive:
                continue
            try:
                await self.registry.report_load(self.info, self.session)
            except Exception as exc:  # the next report tries again
                log.warning("cannot report load: %s", exc)

    async def bundle_counters(self) -> dict[Bundle, BundleCounters]:
        """The traffic so far of the host's loaded topics, by bundle: the raw
        figures of a load report, counted in slices with the event loop
        running between them (:func:`.load_report.count_by_bundle`)."""
        return await count_by_bundle(self.host.loaded_topics(), self.layouts.bounds)

    async def mark_draining(self, on: bool) -> None:
        """Say in our registry record whether we are draining (no broker gives
        a bundle to a draining one). Metadata errors propagate."""
        self.info.draining = on
        if self.session is not None and self.session.alive:
            await self.registry.register(self.info, self.session)

    async def drain(self, timeout_s: float = 20.0, move_timeout_s: float = 10.0) -> draining.DrainResult:
        """Move every bundle we own to the other brokers (:mod:`.drain`); we stay
        marked draining (taking no bundle) until :meth:`undrain` or the stop."""
        return await draining.drain(self, timeout_s, move_timeout_s)

    async def undrain(self) -> None:
        """Take bundles again after a drain."""
        await self.mark_draining(False)

    async def close(self) -> None:
        """Drain first (when ``drain_on_stop``), then free the bundles still
        ours, leave the registry and the election."""
        if self.drain_on_stop is not None and self.serving:
            timeout_s, move_timeout_s = self.drain_on_stop
            try:
                await self.drain(timeout_s, move_timeout_s)
            except Exception as exc:  # the release below still frees them
                log.warning("the drain before the stop failed: %s", exc)
        self.closing = True
        if self._monitor is not None:
            self._monitor.cancel()
        if self._reporter is not None:
            self._reporter.cancel()
        # Freeing bundles, leaving the election and ending the session all
        # talk to the metadata store; each is bounded, so a stop with the
        # store gone (etcd down) ends promptly: the leader frees what we held
        # once our session expires.
        if self.session is not None and self.session.alive:
            try:
                await asyncio.wait_for(self._free_bundles(), CLOSE_STEP_S)
            except asyncio.TimeoutError:
                self.store_unreachable = True
                log.info("the metadata store is too slow to free our bundles on the way out; "
                         "they are freed when our session expires")
        else:
            self.store_unreachable = True
        if self.leader is not None:
            await _bounded(self.leader.stop(), "leaving the leader election")
        if self._tasks:
            # Unloads in progress finish: a ledger closed halfway would keep
            # the factory's close waiting.
            await asyncio.wait(list(self._tasks), timeout=10)
        self.channel.close()
        self.layouts.close()
        self.registry.close()
        if self.session is not None:
            await _bounded(self.session.close(), "ending our metadata session")

    async def _free_bundles(self) -> None:
        for bundle in self.channel.owned_by(self.broker_id):
            try:
                state = await self.channel.transition(bundle, RELEASING, self.broker_id, self.broker_id)
                await self.channel.transition(bundle, FREE, None, self.broker_id, expected=state)
            except Exception as exc:  # the leader cleans up after our session instead
                log.info("cannot free bundle %s on the way out: %s", bundle, exc)

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- following the channel ----------------------------------------------------------
    def _on_bundle(self, bundle: Bundle, old: BundleState, new: BundleState) -> None:
        if self.closing:
            return  # the service closes every topic itself on the way out
        me = self.broker_id
        if new.state == ASSIGNING and new.broker == me:
            self._spawn(self._take(bundle, new))
        if new.state == RELEASING and new.source == me:
            self._spawn(self._release(bundle, new))
            return
        if new.state == SPLITTING and new.broker == me and old.state != SPLITTING:
            self._spawn(splitting.carry_out(self.channel, self.layouts, me, bundle, new))
            return
        if self.host.holds_released(bundle):
            if new.state == OWNED:  # the new owner has it: send our clients there
                owner = self.registry.live.get(new.broker)
                assigned = (owner.service_url, owner.service_url_tls) if owner is not None and self.multi_phase \
                    else None
                log.info("bundle %s is owned by %s: handing its clients over", bundle, new.broker)
                self.host.hand_over_bundle(bundle, assigned)
            return
        if old.broker == me and old.state in (OWNED, ASSIGNING) and not (new.state == OWNED and new.broker == me):
            # (Owned -> Splitting by us is not a loss: that case returned above.)
            log.info("bundle %s is no longer ours (%s %s): unloading its topics", bundle, new.state, new.broker)
            self._spawn(self.host.unload_bundle(bundle))

    async def _release(self, bundle: Bundle, state: BundleState) -> None:
        """Source side of a move: release (or, the old way, unload) the bundle's
        topics, then pass the bundle on: Releasing -> Assigning(dst), naming
        the released topics."""
        topics: list[MovingTopic] = []
        try:
            if self.multi_phase:
                topics = await self.host.release_bundle(bundle)  # held released from its first step
            else:
                await self.host.unload_bundle(bundle)
        except Exception:
            log.exception("releasing bundle %s failed", bundle)
        # The names let the destination open the topics before it takes the
        # bundle: the clients handed over find them loaded. Changed under us
        # (the leader cleaned up): the Owned handler still hands over.
        await self._write_until_settled(
            bundle, state, lambda expected: self.channel.transition(bundle, ASSIGNING, state.broker, self.broker_id,
                                                                    expected=expected, topics=tuple(topics)),
            done=lambda s: s.state != RELEASING or s.source != self.broker_id, what=f"pass on to {state.broker}")

    async def _write_until_settled(self, bundle: Bundle, state: BundleState, write, *, done, what: str) -> bool:
        """``write(expected)`` the step this broker owes ``bundle`` in ``state``
        (take it, pass it on), trying again while the store fails: True once
        written. A failed write may or may not have happened, and nobody else
        would take the step for a live broker (the leader rescues only the
        bundles of gone ones), so a bundle would stay Assigning or Releasing
        for good: before each new try the record is read from the store, and
        the tries end, False, when it shows ``done`` (the write happened),
        changed otherwise (a race, the leader), our session ended (joining
        again takes up what is left) or we close."""
        delay = STEP_RETRY_FIRST_S
        expected = state
        while True:
            try:
                await write(expected)
                return True
            except (LostRace, IllegalTransition):
                return False
            except Exception as exc:
                log.warning("cannot %s bundle %s (%s); trying again in %.1f s", what, bundle, exc, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, STEP_RETRY_MAX_S)
            while True:
                if self.closing or self.session is None or not self.session.alive:
                    return False
                try:
                    now = await self.channel.refresh(key_of(bundle))
                    break
                except Exception as exc:
                    log.info("cannot read bundle %s before trying again (%s)", bundle, exc)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, STEP_RETRY_MAX_S)
            if now is None or now.version != expected.version:
                return now is not None and done(now)
            expected = now

    async def unload(self, bundle: Bundle, destination: str | None = None, timeout: float = 30.0) -> str:
        """Move ``bundle`` from its owner to ``destination`` (default: the least
        loaded other live broker); returns the new owner once it owns it.

        Raises ValueError for a bundle that is not owned, a destination that
        is not a live broker or is the owner already, or a destination that
        left during the handover (its bundle is then reassigned, and that is
        said as soon as it is, not after ``timeout``); TimeoutError if the
        move does not finish within ``timeout``.
        """
        state = self.channel.get(bundle)
        if state.state != OWNED:
            raise ValueError(f"bundle {bundle} is {state.state}, not owned: nothing to unload")
        live = sorted(self.registry.live)
        if destination is None:
            destination = least_loaded(bundle, self.registry.candidates(), self.channel, exclude={state.broker})
            if destination is None:
                raise ValueError(f"no other live broker to move bundle {bundle} to")
        elif destination not in self.registry.live:
            raise ValueError(f"destination broker {destination} is not a live broker of this cluster; "
                             f"live: {', '.join(live)}")
        if destination == state.broker:
            raise ValueError(f"bundle {bundle} is already owned by {destination}")
        started = asyncio.get_running_loop().time()
        await self.channel.transition(bundle, RELEASING, destination, state.broker, expected=state)
        moving = False

        def settled(s: BundleState) -> bool:
            # Owned again after the handover began: by the destination, or,
            # when the destination died meanwhile, by whoever the leader gave
            # the bundle to. (Until the handover shows, an Owned state is the
            # one before it.)
            nonlocal moving
            moving = moving or s.state != OWNED
            return s.state == OWNED and (s.broker == destination or moving)

        done = await self.channel.wait_for(bundle, settled, timeout)
        if done.broker != destination:
            raise ValueError(f"bundle {bundle} did not move to {destination}, which left the cluster during the "
                             f"handover; it is owned by {done.broker}")
        self.transfers.observe(asyncio.get_running_loop().time() - started)
        return done.broker

    async def _take(self, bundle: Bundle, state: BundleState) -> None:
        if self.session is None or not self.session.alive:
            return
        moved = state.source not in (None, self.broker_id)
        prepared = moved and bool(state.topics) and self.multi_phase
        if prepared:
            # Before Owned: the source hands its clients over at Owned, and
            # they should find the ledgers open rather than wait for them.
            # (A client that arrives meanwhile waits for Owned: check_owner.)
            try:
                await self.host.prepare_bundle(bundle, list(state.topics))
            except Exception:
                log.exception("preparing bundle %s failed; its topics load on first use", bundle)
        taken = await self._write_until_settled(
            bundle, state, lambda expected: self.channel.transition(bundle, OWNED, self.broker_id, state.source,
                                                                    expected=expected),
            done=lambda s: s.state == OWNED and s.broker == self.broker_id, what="take")
        if taken:
            log.info("broker %s owns bundle %s", self.broker_id, bundle)
            if moved:
                self._arrivals[bundle] = asyncio.get_running_loop().time()
                self.host.bundle_arrived(bundle)
            return
        now = self.channel.get(bundle)
        if prepared and not (now.state == OWNED and now.broker == self.broker_id):
            # Not ours after all (the leader gave it elsewhere meanwhile): the
            # topics loaded for it go; their ledgers' next owner fences them.
            self._spawn(self.host.unload_bundle(bundle))

    async def split(self, bundle: Bundle, at: int, timeout: float = 30.0) -> list[Bundle]:
        """Cut ``bundle`` in two at hash ``at`` (its owner does it; see
        :mod:`.splitting`); the namespace's bundles after the split."""
        halves = await splitting.request(self.channel, self.layouts, bundle, at, timeout)
        self.splits += 1
        return halves

    # -- ownership and lookups ----------------------------------------------------------
    def bundle_of(self, name: TopicName) -> Bundle:
        return self.layouts.bundle_of(str(name), name.namespace_name)

    def arrived_within(self, name: TopicName, seconds: float) -> bool:
        """``name``'s bundle moved here from another broker in the last ``seconds``."""
        at = self._arrivals.get(self.bundle_of(name))
        return at is not None and asyncio.get_running_loop().time() - at <= seconds

    def bundles(self, namespace: str) -> list[Bundle]:
        """``namespace``'s bundles now (its layout)."""
        return self.layouts.bundles(namespace)

    def owns(self, name: TopicName) -> bool:
        state = self.channel.get(self.bundle_of(name))
        return state.state == OWNED and state.broker == self.broker_id and self.serving

    @property
    def serving(self) -> bool:
        return self.session is not None and self.session.alive and not self.closing

    async def check_owner(self, name: TopicName) -> None:
        """Return once this broker owns ``name``'s bundle; ServiceNotReady if another
        broker does (the client looks up again) or it is still unowned after a lookup."""
        if self.owns(name):
            return
        result = await self.lookup(name)
        if not result.local:
            raise OwnedElsewhere(f"topic {name} is served by {result.service_url}, not by this broker",
                                 result.web_service_url, result.web_service_url_tls)

    async def lookup(self, name: TopicName) -> LookupResult:
        """The owner of ``name``'s bundle, assigning it first if nobody owns it."""
        if not self.serving:
            raise ServiceNotReady("this broker is not serving (no metadata session): try another broker")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.lookup_timeout_s
        while True:
            bundle = self.bundle_of(name)  # again each time: a split may have cut it since
            state = self.channel.get(bundle)
            owner = self.registry.live.get(state.broker) if state.broker else None
            if state.state == OWNED and owner is not None:
                self.lookups_answered += 1
                if owner.broker_id != self.broker_id:
                    self.lookup_redirects += 1
                return LookupResult(owner.broker_id, owner.service_url, owner.web_service_url,
                                    owner.broker_id == self.broker_id, dict(owner.listeners),
                                    owner.service_url_tls, owner.web_service_url_tls)
            try:
                if state.state in (INIT, FREE):
                    target = least_loaded(bundle, self.registry.candidates(), self.channel, pending=self._pending)
                    if target is None:
                        raise ServiceNotReady("no live broker in the cluster")
                    self._pending[target] += 1
                    try:
                        await self.channel.transition(bundle, ASSIGNING, target, state.broker, expected=state)
                    finally:
                        self._pending[target] -= 1
                    continue
                if state.state == DELETED:
                    # Split: our layout copy is late. Read it; a range that left
                    # the layout never comes back, so it must have changed.
                    if bundle in await self.layouts.load(bundle.namespace):
                        raise ServiceNotReady(f"bundle {bundle} is Deleted but still in the layout: try again")
                    continue
            except (LostRace, IllegalTransition):
                continue
            except ServiceNotReady:
                raise
            except Exception as exc:
                # The official C++ client keeps its connection for this phrase (see in_flight_message).
                raise ServiceNotReady(f"Failed to acquire ownership for bundle {bundle}: {exc}; try again") from None
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise ServiceNotReady(in_flight_message(bundle, state, self.lookup_timeout_s))
            try:
                await self.channel.wait_for(bundle, lambda s, v=state.version: s.version != v,
                                            min(remaining, 0.5))
            except asyncio.TimeoutError:
                pass  # re-check: the owner's registry record may have come or gone

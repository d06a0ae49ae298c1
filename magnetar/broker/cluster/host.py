"""What the cluster member needs of the broker that serves the bundles' topics.

The member (:mod:`.member`) follows the bundle ownership channel and decides
when a bundle comes and goes; the host (``server.service.BrokerService``,
which imports this room, so it is named here and not imported) acts on the
topics. The member holds one host and calls only what :class:`BundleHost`
says, so a unit test can drive a member against a small fake host.

A move without client lookups (PIP-307) takes these calls, in this order:
``release_bundle`` on the source (its topics stop appending, persist their
cursors and hold their clients; it names them), ``prepare_bundle`` on the
destination (it loads those topics while the bundle is still Assigning to
it, so their ledgers are open before any client arrives), then, once the
channel shows the bundle owned again, ``bundle_arrived`` on the destination
and ``hand_over_bundle`` on the source (the clients go to the new owner).
Between release and hand-over, the source's host alone knows which bundles
it holds released (``holds_released``): the released-bundle state has that
one owner.
"""
from __future__ import annotations

from typing import Any, Protocol

from .bundles import Bundle
from ..topics.moving import MovingTopic


class BundleHost(Protocol):
    """The broker service as its cluster member sees it.

    Failure modes the host must absorb: none of these may raise for one
    topic's failure (it is logged, and that topic's clients look it up);
    ``hand_over_bundle`` runs in a channel listener and must not raise at all.
    """

    async def unload_bundle(self, bundle: Bundle) -> None:
        """Close ``bundle``'s loaded topics (it is no longer ours): their
        clients are disconnected and look the topics up again."""

    async def unload_all(self) -> None:
        """Close every loaded topic: the member lost its metadata session."""

    async def release_bundle(self, bundle: Bundle) -> list[MovingTopic]:
        """First phase of a move: ``bundle``'s topics stop appending, close
        their ledgers and persist their cursors; their clients stay
        connected, held, and from now until :meth:`hand_over_bundle` the
        bundle is held released. Returns the released topics, busiest first,
        with their tails (the destination prepares them)."""

    async def prepare_bundle(self, bundle: Bundle, topics: list[MovingTopic]) -> None:
        """Destination side, while ``bundle`` is Assigning to this broker: load
        ``topics`` (open their managed ledgers: fence, recover, new ledger),
        so the clients handed over find them ready. Returns within a bound
        (loads still under way then go on in the background); a topic that
        fails to load is logged and loads again on first use."""

    def bundle_arrived(self, bundle: Bundle) -> None:
        """The moved ``bundle`` is now owned here: its topics loaded before
        (:meth:`prepare_bundle`) hold their dispatch as a freshly loaded
        moved topic does."""

    def holds_released(self, bundle: Bundle) -> bool:
        """Whether ``bundle`` was released here and waits to be handed over."""

    def hand_over_bundle(self, bundle: Bundle, assigned: tuple[str, str] | None) -> None:
        """Last phase: send the released bundle's clients to the new owner
        (``assigned``: its plain and TLS service URLs; None: they look it up).
        The bundle is no longer held released afterwards."""

    async def handed_over(self) -> None:
        """Return once every hand-over begun by :meth:`hand_over_bundle` has
        told its clients where to go (a drain waits for this before the stop)."""

    def loaded_topics(self) -> list[Any]:
        """The loaded topics, persistent and not, as a new list: the load
        report reads each one's ``name`` and traffic counters
        (:func:`.load_report.count_by_bundle`), in slices, so the list must
        not change under it."""

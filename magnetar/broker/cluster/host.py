"""What the cluster member needs of the broker that serves the bundles' topics.

The member (:mod:`.member`) follows the bundle ownership channel and decides
when a bundle comes and goes; the host (``server.service.BrokerService``,
which imports this room, so it is named here and not imported) acts on the
topics. The member holds one host and calls only what :class:`BundleHost`
says, so a unit test can drive a member against a small fake host.

A move without client lookups (PIP-307) takes three calls, in this order:
``release_bundle`` (the source's topics stop appending and hold their
clients), then, once the channel shows the bundle owned again,
``hand_over_bundle`` (the clients go to the new owner). Between the two, the
host alone knows which bundles it holds released (``holds_released``): the
released-bundle state has that one owner.
"""
from __future__ import annotations

from typing import Protocol

from .bundles import Bundle
from .load_report import BundleCounters


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

    async def release_bundle(self, bundle: Bundle) -> None:
        """First phase of a move: ``bundle``'s topics stop appending and close
        their ledgers; their clients stay connected, held, and from now until
        :meth:`hand_over_bundle` the bundle is held released."""

    def holds_released(self, bundle: Bundle) -> bool:
        """Whether ``bundle`` was released here and waits to be handed over."""

    def hand_over_bundle(self, bundle: Bundle, assigned: tuple[str, str] | None) -> None:
        """Last phase: send the released bundle's clients to the new owner
        (``assigned``: its plain and TLS service URLs; None: they look it up).
        The bundle is no longer held released afterwards."""

    async def handed_over(self) -> None:
        """Return once every hand-over begun by :meth:`hand_over_bundle` has
        told its clients where to go (a drain waits for this before the stop)."""

    def bundle_counters(self) -> dict[Bundle, BundleCounters]:
        """Traffic so far of the loaded topics, by bundle (the load reports' raw figures)."""

"""The seam between a dispatcher and the dispatch rate limits it obeys.

Before a read a dispatcher asks its subscription's :class:`DispatchThrottle`
how many messages may go now (:meth:`~DispatchThrottle.allowance`); when the
answer is 0 it sends nothing and tries again after
:meth:`~DispatchThrottle.retry_after` seconds. What it sends is then
:meth:`~DispatchThrottle.charge`\\ d. A topic finds the throttle of each of its
subscriptions through :class:`DispatchRates`; the limits themselves
(Pulsar's ``dispatchRate`` and ``subscriptionDispatchRate`` policies) live
above, in ``broker.policies.dispatch_rate``. A topic without any uses
:data:`UNLIMITED`, which allows everything and costs a method call.
"""
from __future__ import annotations

from typing import Protocol


class DispatchThrottle(Protocol):
    def allowance(self, wanted: int) -> int:
        """How many of ``wanted`` messages may be dispatched now (0: none)."""

    def retry_after(self) -> float:
        """Seconds until :meth:`allowance` answers more than 0 again."""

    def charge(self, messages: int, nbytes: int) -> None:
        """``messages`` (``nbytes`` of them) were dispatched."""


class DispatchRates(Protocol):
    def throttle(self, subscription: str) -> DispatchThrottle:
        """The throttle of the topic's subscription ``subscription``."""


class _Unlimited:
    """No dispatch rate: everything may go at once."""

    def allowance(self, wanted: int) -> int:
        return wanted

    def retry_after(self) -> float:
        return 0.0

    def charge(self, messages: int, nbytes: int) -> None:
        pass

    def throttle(self, subscription: str) -> "_Unlimited":
        return self


#: Both a :class:`DispatchRates` and a :class:`DispatchThrottle` that limit nothing.
UNLIMITED = _Unlimited()

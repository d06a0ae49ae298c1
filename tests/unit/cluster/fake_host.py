"""A small :class:`~magnetar.broker.cluster.host.BundleHost` for member tests.

It serves no topics: it records what its member asked, in order, and keeps
the released bundles the way the broker service does (held from
``release_bundle`` until ``hand_over_bundle``).
"""
from __future__ import annotations

from typing import Any

from magnetar.broker.cluster.bundles import Bundle
from magnetar.broker.topics.moving import MovingTopic


class FakeHost:
    def __init__(self) -> None:
        #: ("unload", bundle), ("unload_all",), ("release", bundle), ("hand_over", bundle, assigned),
        #: ("prepare", bundle, topics, owner at that moment), ("arrived", bundle)
        self.calls: list[tuple] = []
        self.released: set[Bundle] = set()
        #: bundle -> the topics this host "serves" (what release_bundle names).
        self.loaded: dict[Bundle, list[MovingTopic]] = {}
        #: Set by a test: what the load report counts (objects with a name and counters).
        self.topics: list[Any] = []
        #: Set by a test: the bundle's owner as the channel says, recorded at prepare.
        self.owner_of = lambda bundle: None

    @property
    def unloaded(self) -> list:
        """Bundles unloaded, and "all" for each unload of everything."""
        return [c[1] if c[0] == "unload" else "all" for c in self.calls if c[0] in ("unload", "unload_all")]

    async def unload_bundle(self, bundle: Bundle) -> None:
        self.calls.append(("unload", bundle))

    async def unload_all(self) -> None:
        self.calls.append(("unload_all",))

    async def release_bundle(self, bundle: Bundle) -> list[MovingTopic]:
        self.released.add(bundle)
        self.calls.append(("release", bundle))
        return list(self.loaded.get(bundle, []))

    async def prepare_bundle(self, bundle: Bundle, topics: list[MovingTopic]) -> None:
        self.calls.append(("prepare", bundle, topics, self.owner_of(bundle)))

    def bundle_arrived(self, bundle: Bundle) -> None:
        self.calls.append(("arrived", bundle))

    def holds_released(self, bundle: Bundle) -> bool:
        return bundle in self.released

    def hand_over_bundle(self, bundle: Bundle, assigned: tuple[str, str] | None) -> None:
        self.released.discard(bundle)
        self.calls.append(("hand_over", bundle, assigned))

    async def handed_over(self) -> None:
        pass

    def loaded_topics(self) -> list[Any]:
        return list(self.topics)

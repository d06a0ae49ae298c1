"""Each namespace's bundle layout: where its bundles begin and end.

A namespace starts cut into ``default_count`` equal ranges, with no record in
the store. A split (:mod:`.member`) replaces one bundle by its two halves and
writes the namespace's boundaries to ``/loadbalance/layouts/<tenant>/<ns>``
as ``{"boundaries": [0, ..., 4294967296]}`` with a compare-and-set, so two
splits of one namespace never overwrite each other. Layouts only ever get
finer: a range that left a layout never comes back, which is what lets a
broker whose copy is stale notice it (it finds the old bundle Deleted in the
channel and reads the layout again, :meth:`Layouts.load`).

Every broker keeps a copy of every layout, read at :meth:`Layouts.start` and
kept current by one prefix watch, so placing a topic (:meth:`bundle_of`)
never waits. Failure modes: metadata errors propagate from :meth:`load` and
:meth:`replace`; :meth:`replace` raises ValueError when the bundle is no
longer in the layout and LostRace when another split wrote first; an
unreadable record is logged and read as the default layout.
"""
from __future__ import annotations

import asyncio
import bisect
import json
import logging

from magnetar.metadata import MetadataStore
from magnetar.metadata.store import BadVersion, Notification, KeyNotFound

from .bundles import FULL, Bundle, split_namespace, topic_hash
from .channel import LostRace

log = logging.getLogger(__name__)

ROOT = "/loadbalance/layouts"


def _bounds_of(bundles: list[Bundle]) -> list[int]:
    return [b.lower for b in bundles] + [FULL]


def _valid(bounds: object) -> bool:
    return (isinstance(bounds, list) and len(bounds) >= 2 and bounds[0] == 0 and bounds[-1] == FULL
            and all(isinstance(b, int) for b in bounds) and all(a < b for a, b in zip(bounds, bounds[1:])))


class Layouts:
    """This broker's copy of every namespace's bundle layout."""

    def __init__(self, store: MetadataStore, default_count: int) -> None:
        self.store = store
        self.default_count = default_count
        #: namespace -> (boundaries, the record's version).
        self._bounds: dict[str, tuple[list[int], int]] = {}
        #: namespace -> the default layout's boundaries (for those without a
        #: record: made once, not at each :meth:`bundle_of`).
        self._default: dict[str, list[int]] = {}
        self._watch = None
        self._tasks: set[asyncio.Task] = set()

    async def start(self) -> None:
        self._watch = self.store.watch(ROOT, self._on_change)
        for tenant in await self.store.children(ROOT):
            for ns in await self.store.children(f"{ROOT}/{tenant}"):
                await self.load(f"{tenant}/{ns}")

    def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        for task in self._tasks:
            task.cancel()

    def _on_change(self, note: Notification) -> None:
        namespace = note.key[len(ROOT) + 1:]
        if namespace.count("/") != 1:
            return
        task = asyncio.get_running_loop().create_task(self._load_quietly(namespace))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _load_quietly(self, namespace: str) -> None:
        try:
            await self.load(namespace)
        except Exception as exc:  # the next change, or a stale lookup, reads it again
            log.warning("cannot read the bundle layout of %s: %s", namespace, exc)

    async def load(self, namespace: str) -> list[Bundle]:
        """Read ``namespace``'s layout from the store into the copy; its bundles."""
        self._keep(namespace, await self.store.get(f"{ROOT}/{namespace}"))
        return self.bundles(namespace)

    def _keep(self, namespace: str, record) -> None:
        if record is None:
            self._bounds.pop(namespace, None)
            return
        try:
            bounds = json.loads(record.value)["boundaries"]
        except (ValueError, KeyError, TypeError):
            bounds = None
        if not _valid(bounds):
            log.warning("unreadable bundle layout of %s: read as %d equal bundles", namespace, self.default_count)
            bounds = _bounds_of(split_namespace(namespace, self.default_count))
        held = self._bounds.get(namespace)
        if held is None or held[1] <= record.version:  # an older read may finish after a newer one
            self._bounds[namespace] = (bounds, record.version)

    def bundles(self, namespace: str) -> list[Bundle]:
        """``namespace``'s bundles, in hash order."""
        held = self._bounds.get(namespace)
        if held is None:
            return split_namespace(namespace, self.default_count)
        bounds = held[0]
        return [Bundle(namespace, bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]

    def bounds(self, namespace: str) -> list[int]:
        """``namespace``'s boundaries in force: ``[0, ..., FULL]``, bundle ``i``
        from ``bounds[i]`` to ``bounds[i + 1]``. The list is the copy's own:
        read it, never change it (a new layout is a new list)."""
        held = self._bounds.get(namespace)
        if held is not None:
            return held[0]
        bounds = self._default.get(namespace)
        if bounds is None:
            bounds = self._default[namespace] = _bounds_of(split_namespace(namespace, self.default_count))
        return bounds

    def bundle_of(self, topic: str, namespace: str) -> Bundle:
        """The bundle of ``namespace`` that holds ``topic`` (its full name)."""
        bounds = self.bounds(namespace)
        i = bisect.bisect_right(bounds, topic_hash(topic)) - 1
        return Bundle(namespace, bounds[i], bounds[i + 1])

    async def replace(self, parent: Bundle, halves: tuple[Bundle, Bundle]) -> list[Bundle]:
        """Write the layout with ``parent`` cut into ``halves``; the new bundles.

        Reads the store first (not the copy), so a stale copy cannot undo
        another split. ValueError if ``parent`` is not a bundle of the layout;
        LostRace if the layout changed between the read and the write.
        """
        namespace = parent.namespace
        key = f"{ROOT}/{namespace}"
        record = await self.store.get(key)
        self._keep(namespace, record)
        current = self.bundles(namespace)
        if parent not in current:
            raise ValueError(f"{namespace} has no bundle {parent.range} (split already?)")
        bounds = sorted(set(_bounds_of(current)) | {halves[1].lower})
        try:
            await self.store.put(key, json.dumps({"boundaries": bounds}).encode(),
                                 -1 if record is None else record.version)
        except (BadVersion, KeyNotFound):
            raise LostRace(f"the bundle layout of {namespace} changed under us") from None
        return await self.load(namespace)

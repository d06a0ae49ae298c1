"""Live brokers: one ephemeral record per broker, held by its session.

``/loadbalance/brokers/<broker id>`` holds ``{"broker_id", "service_url",
"web_service_url", "cluster", "started", "load": {...}}``; it vanishes when
the broker's session ends (clean stop, crash, or a pause longer than the
session TTL); ``"draining": true`` while it moves its bundles away before a
stop (no bundle is given to it then), which is how the others learn a broker is gone. The broker id
is ``host:web port``, as in Pulsar.

Every broker keeps the table of live brokers current with a prefix watch and
tells listeners of arrivals and departures. Failure modes: metadata errors
propagate from :meth:`Registry.register` and :meth:`Registry.report_load`
(SessionExpired once the session is gone); an unreadable record is skipped.
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Callable

from magnetar.metadata import MetadataStore, MetadataSession
from magnetar.metadata.store import Notification

log = logging.getLogger(__name__)

ROOT = "/loadbalance/brokers"


@dataclass
class BrokerInfo:
    broker_id: str
    service_url: str
    web_service_url: str
    cluster: str
    started: float = field(default_factory=time.time)
    load: dict = field(default_factory=dict)
    #: advertised_listeners: name -> URL.
    listeners: dict = field(default_factory=dict)
    #: pulsar+ssl and https URLs when the broker has TLS listeners (lookups by TLS clients), else "".
    service_url_tls: str = ""
    web_service_url_tls: str = ""
    #: Moving its bundles away before it stops (:mod:`.drain`): given no new bundle.
    draining: bool = False

    def doc(self) -> bytes:
        return json.dumps(self.__dict__).encode()

    @classmethod
    def parse(cls, value: bytes) -> "BrokerInfo":
        doc = json.loads(value)
        return cls(doc["broker_id"], doc["service_url"], doc["web_service_url"], doc.get("cluster", ""),
                   doc.get("started", 0.0), doc.get("load", {}), doc.get("listeners", {}),
                   doc.get("service_url_tls", ""), doc.get("web_service_url_tls", ""),
                   bool(doc.get("draining", False)))


Listener = Callable[[str, BrokerInfo | None], None]  # (broker id, info or None when it left)


class Registry:
    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self.live: dict[str, BrokerInfo] = {}
        self._listeners: list[Listener] = []
        self._watch = None
        self._refreshing: set[str] = set()
        self._stale: set[str] = set()

    async def start(self) -> None:
        self._watch = self.store.watch(ROOT, self._on_change)
        for broker_id in await self.store.children(ROOT):
            await self._refresh(broker_id)

    def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None

    def candidates(self) -> list[str]:
        """The live brokers a bundle may be given to: every one but those draining."""
        return sorted(b for b, info in self.live.items() if not info.draining)

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    async def register(self, info: BrokerInfo, session: MetadataSession) -> None:
        """Publish ``info`` under ``session`` (replacing a record of a previous life)."""
        await self.store.put(f"{ROOT}/{info.broker_id}", info.doc(), session=session)
        self._set(info.broker_id, info)

    async def report_load(self, info: BrokerInfo, session: MetadataSession) -> None:
        await self.store.put(f"{ROOT}/{info.broker_id}", info.doc(), session=session)

    def _on_change(self, note: Notification) -> None:
        broker_id = note.key[len(ROOT) + 1:]
        if not broker_id or "/" in broker_id:
            return
        if broker_id in self._refreshing:
            self._stale.add(broker_id)  # read once more when the read in flight is done
            return
        self._refreshing.add(broker_id)
        asyncio.get_running_loop().create_task(self._refresh_soon(broker_id))

    async def _refresh_soon(self, broker_id: str) -> None:
        # One read at a time per broker, repeated while changes keep coming:
        # an older read finishing last must not bring a gone broker back.
        try:
            while True:
                self._stale.discard(broker_id)
                await self._refresh(broker_id)
                if broker_id not in self._stale:
                    return
        finally:
            self._refreshing.discard(broker_id)

    async def _refresh(self, broker_id: str) -> None:
        try:
            record = await self.store.get(f"{ROOT}/{broker_id}")
        except Exception as exc:
            log.warning("cannot read broker record %s: %s", broker_id, exc)
            return
        info = None
        if record is not None:
            try:
                info = BrokerInfo.parse(record.value)
            except (ValueError, KeyError, TypeError):
                log.warning("unreadable broker record %s", broker_id)
                return
        self._set(broker_id, info)

    def _set(self, broker_id: str, info: BrokerInfo | None) -> None:
        had = broker_id in self.live
        if info is None:
            self.live.pop(broker_id, None)
        else:
            self.live[broker_id] = info
        if had != (info is not None) or info is not None:
            for listener in list(self._listeners):
                try:
                    listener(broker_id, info)
                except Exception:
                    log.exception("registry listener failed")

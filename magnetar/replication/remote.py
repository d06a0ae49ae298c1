"""Clients for remote clusters, reached through the configuration store.

A cluster record (``/admin/clusters/<name>``) names every broker of that
cluster in a multi-host ``brokerServiceUrl`` (and, for brokers with a TLS
listener, ``brokerServiceUrlTls``); a client is built on the first of them
that accepts a connection. When a replicator reports a failure the
cluster's client is dropped, and the next one starts from the following
host, so a dead broker is passed over. Clients present the broker's own
credential (``broker_client_authentication_*``) to secured remotes.

With ``tls`` (the broker's ``broker_client_tls_enabled``) only the record's
``brokerServiceUrlTls`` is used, and the remote's certificate must chain to
``trust_certs_file``: a remote that publishes no TLS URL is not reached at
all rather than reached in plain text.
"""
from __future__ import annotations

import asyncio
import logging

from magnetar.broker.namespaces import resources
from magnetar.client.aio import AsyncClient, tls_context
from magnetar.client.auth import Authentication
from magnetar.client.producer import AsyncProducer
from magnetar.metadata import MetadataStore

log = logging.getLogger(__name__)


class RemoteClusters:
    """One :class:`AsyncClient` per remote cluster, made on first use."""

    def __init__(self, store: MetadataStore, connect_timeout: float = 5.0,
                 authentication: Authentication | None = None, tls: bool = False,
                 trust_certs_file: str = "") -> None:
        """InvalidConfiguration at once if ``tls`` and a trust, certificate
        or key file cannot be used (the broker refuses to start)."""
        self._store = store
        self._authentication = authentication
        self._tls = tls
        self._client_options: dict = {"authentication": authentication}
        if tls:
            self._client_options["tls_trust_certs_file_path"] = trust_certs_file or None
            tls_context(trust_certs_file or None, False, False, None, None, authentication)
        self._connect_timeout = connect_timeout
        self._clients: dict[str, AsyncClient] = {}
        self._next_host: dict[str, int] = {}
        self._lock = asyncio.Lock()

    async def client(self, cluster: str) -> AsyncClient:
        """A client connected to one of ``cluster``'s brokers.

        Raises ResourceNotFound if the cluster is not registered, ConnectionError if
        none of its brokers answers.
        """
        async with self._lock:
            found = self._clients.get(cluster)
            if found is not None:
                return found
            field = "brokerServiceUrlTls" if self._tls else "brokerServiceUrl"
            urls = resources.broker_urls(await resources.get_cluster(self._store, cluster), field)
            if not urls:
                hint = " (broker_client_tls_enabled: its brokers need a TLS listener, tls_port)" if self._tls else ""
                raise ConnectionError(f"cluster {cluster} has no {field} in the configuration store{hint}")
            start = self._next_host.get(cluster, 0)
            errors = []
            for i in range(len(urls)):
                url = urls[(start + i) % len(urls)]
                candidate = AsyncClient(url, operation_timeout_seconds=30,
                                        connection_timeout_ms=int(self._connect_timeout * 1000),
                                        **self._client_options)
                try:
                    await candidate.connection_to(url, self._connect_timeout)
                except Exception as exc:  # try the next host
                    errors.append(f"{url}: {exc}")
                    await candidate.close()
                    continue
                self._next_host[cluster] = (start + i + 1) % len(urls)
                self._clients[cluster] = candidate
                return candidate
            raise ConnectionError(f"no broker of cluster {cluster} answers ({'; '.join(errors)})")

    async def create_producer(self, cluster: str, topic: str, producer_name: str) -> AsyncProducer:
        """A replicator's producer: deduplicated by the remote broker, and
        never timing out a send (an entry waits for the remote to return)."""
        client = await self.client(cluster)
        return await client.create_producer(
            topic, producer_name=producer_name, send_timeout_millis=0,
            max_pending_messages=1_000_000, properties={"magnetar.deduplicate": "true"},
        )

    async def forget(self, cluster: str, client: AsyncClient | None = None) -> None:
        """Drop ``cluster``'s client (if it is still ``client``): the next
        :meth:`client` reads the record again and tries the next host."""
        async with self._lock:
            current = self._clients.get(cluster)
            if current is None or (client is not None and current is not client):
                return
            del self._clients[cluster]
        await current.close()

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            try:
                await client.close()
            except Exception:
                log.exception("closing a remote cluster's client failed")

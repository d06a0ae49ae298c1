"""Starting and stopping a broker process: metadata, storage, listeners.

:class:`Broker` wires the layers together; :func:`run` is what
``magnetar standalone`` calls. A clean stop (SIGINT/SIGTERM) stops accepting
connections, closes client connections, then syncs and closes every ledger
and the metadata store, so a restart finds everything that was acknowledged.
"""
from __future__ import annotations

import asyncio
import errno
import gc
import logging
import os
import signal
from pathlib import Path
from typing import Callable, Protocol, Sequence

from magnetar.metadata import open_store
from magnetar.metadata.routed import RoutedStore
from magnetar.security import authentication, tls
from magnetar.security.authorization import Authorizer
from magnetar.security.settings import SecuritySettingsError
from magnetar.metadata.store import MetadataError
from magnetar.storage import UNWATCHED_ROOTS, ManagedLedgerFactory, StorageError, orphans
from magnetar.storage.factory import open_factory

from magnetar.broker.config import BrokerConfig
from magnetar.broker.dynamic_config import DynamicConfig, DynamicConfigError
from magnetar.formats import NewerFormatError, check_data_set
from magnetar.broker.policies import backlog_quota
from magnetar.broker.namespaces import resources
from . import dynamic_apply
from .connection import ServerConnection
from magnetar.broker.policies.expiry import MessageExpiry
from magnetar.broker.policies.sweep import stop_sweep
from magnetar.broker.topics.stats_sampling import start_sampling
from magnetar.broker.policies.inactive import InactiveTopics
from .service import BrokerService
from .task_dump import log_task_stacks

log = logging.getLogger(__name__)


class StartupError(Exception):
    """The broker cannot start; the message says what is wrong and what to do
    (the CLI prints it as one line and exits non-zero)."""


def _busy(what: str, host: str, port: int, flag: str, exc: OSError) -> StartupError:
    if exc.errno == errno.EADDRINUSE:
        return StartupError(f"{what} port {port} on {host} is already in use by another process: "
                            f"stop it, or choose another port with {flag}")
    return StartupError(f"cannot listen on {host}:{port} for the {what} ({exc.strerror or exc}): "
                        f"check {flag} and --bind-address")


class Extension(Protocol):
    """A capability built above the broker (geo-replication) that runs with
    it: started once the broker serves, stopped before its topics close."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


#: Builds an extension for a started broker's service and config.
ExtensionFactory = Callable[[BrokerService, BrokerConfig], Extension]


class AdminApi(Protocol):
    """The admin HTTP API (``magnetar.admin.listener.AdminListener``), handed
    in by the command that runs the broker, as extensions are. It starts
    between the Pulsar listener and the cluster join (a member's id and the
    cluster's records name its port). Raises OSError for a busy port,
    ``TlsSetupError`` for unusable certificate files."""

    async def start(self, broker: "Broker", host: str, port: int) -> int: ...

    async def start_tls(self, config: BrokerConfig, host: str) -> int: ...

    async def stop(self) -> None: ...


class Broker:
    """One broker. ``admin``: its admin HTTP API (None: none, whatever
    ``admin_port`` says); ``extensions``: capabilities above it."""

    def __init__(self, config: BrokerConfig, extensions: Sequence[ExtensionFactory] = (),
                 admin: AdminApi | None = None) -> None:
        self.config = config
        self._extension_factories = tuple(extensions)
        self.extensions: list[Extension] = []
        self.store = None
        self.factory: ManagedLedgerFactory | None = None
        self.service: BrokerService | None = None
        self._server: asyncio.base_events.Server | None = None
        self._admin = admin
        self.expiry: MessageExpiry | None = None
        self.stats_sampling: asyncio.Task | None = None
        self.inactive_topics: InactiveTopics | None = None
        self.quota_checks: asyncio.Task | None = None
        self._orphan_sweep: asyncio.Task | None = None
        self.port = config.port
        self._tls_server: asyncio.base_events.Server | None = None
        self.tls_port = -1
        self.admin_tls_port = -1
        self.admin_port = config.admin_port if admin is not None else -1
        #: The settings changed without a restart (admin brokers update-dynamic-config).
        self.dynamic: DynamicConfig | None = None
        #: Set by :func:`serve`: stops the process as SIGTERM does (admin's shutdown).
        self.request_stop: Callable[[], None] | None = None

    async def start(self) -> None:
        config = self.config
        data = Path(config.data_dir)
        data.mkdir(parents=True, exist_ok=True)
        try:
            self.store = await open_store(config.resolved_metadata_url, unwatched=UNWATCHED_ROOTS)
        except MetadataError as exc:
            raise StartupError(f"cannot open the metadata store: {exc}") from None
        if config.separate_configuration_store:
            try:
                shared = await open_store(config.configuration_store_url)
            except MetadataError as exc:
                await self.store.close()
                raise StartupError(f"cannot open the configuration store: {exc}") from None
            self.store = RoutedStore(self.store, shared, resources.SHARED_BY_REGIONS)
        # Dynamic settings (set through the admin API) win over the file's.
        self.dynamic = DynamicConfig(self.store, config, lambda names: dynamic_apply.apply(self, names))
        try:
            # First: data a newer Magnetar wrote is not touched (one line, exit 1).
            await check_data_set(self.store)
            await self.dynamic.load()
        except (NewerFormatError, DynamicConfigError) as exc:
            await self.store.close()
            raise StartupError(str(exc)) from None
        storage = config.storage_path
        storage.mkdir(parents=True, exist_ok=True)
        try:
            self.factory = await open_factory(storage, self.store, config.storage,
                                              session_ttl_s=config.cluster_session_ttl_s,
                                              own_dir=config.data_path)  # storage_dir may be shared
        except StorageError as exc:
            await self.store.close()
            raise StartupError(str(exc)) from None
        orphan_mark = None
        if not config.clustered:
            # In a cluster other brokers create ledger files in the same
            # directory at any moment: an unnamed file may be one being born.
            # Standalone, the sweep reads every managed ledger's metadata, so
            # it runs after the broker serves, below this start's mark.
            try:
                orphan_mark = await orphans.mark(self.store)
            except StorageError as exc:
                raise StartupError(str(exc)) from None
        # Before clients can connect: cluster, tenant public, namespace public/default.
        # A cluster's broker adds its URLs once its listeners run (ports picked
        # then); until then it only makes sure the record exists.
        await resources.bootstrap(self.store, config.cluster_name, {} if config.clustered else self._cluster_data(),
                                  config.clustered, region=config.separate_configuration_store)
        self.service = BrokerService(config, self.store, self.factory)
        try:
            self.service.authenticator = authentication.build(config)
            self.service.authorizer = Authorizer.from_settings(config)
        except SecuritySettingsError as exc:
            raise StartupError(f"security settings: {exc}") from None
        if config.clustered:
            # Loaded here: a standalone broker does not carry a member's code.
            from magnetar.broker.cluster.leader import SheddingSettings, SplitSettings
            from magnetar.broker.cluster.member import ClusterMember
            from magnetar.broker.cluster.registry import BrokerInfo

            # Before the listener: until the member has joined, lookups and
            # topic loads answer ServiceNotReady instead of serving as standalone.
            self.service.cluster = ClusterMember(
                self.store, BrokerInfo("", "", "", config.cluster_name), self.service,
                multi_phase=config.load_balancer_multi_phase_bundle_unload,
                report_interval_s=config.load_balancer_report_interval_s,
                shedding=SheddingSettings(config.load_balancer_enabled, config.load_balancer_shedding_interval_s,
                                          config.load_balancer_load_threshold, config.load_balancer_shedding_cycles,
                                          config.load_balancer_broker_cooldown_s),
                auto_split=SplitSettings(config.load_balancer_auto_bundle_split_enabled,
                                         config.load_balancer_namespace_bundle_max_topics,
                                         config.load_balancer_namespace_bundle_max_msg_rate,
                                         config.load_balancer_namespace_maximum_bundles),
                bundles_per_namespace=config.default_namespace_bundles,
                session_ttl_s=config.cluster_session_ttl_s, lookup_timeout_s=config.lookup_timeout_s)
            if config.drain_on_stop:
                self.service.cluster.drain_on_stop = (config.drain_timeout_s, min(10.0, config.drain_timeout_s))
        self.expiry = MessageExpiry(self.service, self.store, config.message_expiry_check_interval_s).start()
        self.stats_sampling = start_sampling(self.service.topics, config.stats_update_frequency_s)
        self.inactive_topics = InactiveTopics(self.service, config).start()
        self.quota_checks = backlog_quota.start_checks(self.service, config.backlog_quota_check_interval_s)
        try:
            self._server = await asyncio.get_running_loop().create_server(
                lambda: ServerConnection(self.service), config.bind_address, config.port, reuse_address=True
            )
        except OSError as exc:
            raise _busy("Pulsar protocol", config.bind_address, config.port, "--port", exc) from None
        self.port = self._server.sockets[0].getsockname()[1]
        if config.tls_enabled and config.tls_port >= 0:
            await self._listen_tls()
        if config.port == 0:
            config.port = self.port  # lookups must name the real port
        if self._admin is not None and config.admin_port >= 0:
            try:
                self.admin_port = await self._admin.start(self, config.bind_address, config.admin_port)
            except OSError as exc:
                raise _busy("admin HTTP", config.bind_address, config.admin_port, "--admin-port", exc) from None
            if config.admin_port == 0:
                config.admin_port = self.admin_port  # the cluster's records must name the real port
            if config.tls_enabled and config.admin_tls_port >= 0:
                try:
                    self.admin_tls_port = await self._admin.start_tls(config, config.bind_address)
                except tls.TlsSetupError as exc:
                    raise StartupError(str(exc)) from None
                except OSError as exc:
                    raise _busy("admin HTTPS", config.bind_address, config.admin_tls_port, "admin_tls_port",
                                exc) from None
        if config.clustered:
            # Every broker adds its URLs: other regions reach the cluster through any of them.
            await resources.add_cluster_broker(self.store, config.cluster_name, self._cluster_data())
        else:
            await resources.ensure_cluster(self.store, config.cluster_name, self._cluster_data())
        if config.clustered:
            await self._join_cluster()
        for build in self._extension_factories:
            extension = build(self.service, config)
            await extension.start()
            self.extensions.append(extension)
        if orphan_mark is not None:
            self._orphan_sweep = asyncio.get_running_loop().create_task(orphans.sweep_later(
                self.store, self.factory.backend, orphan_mark, config.orphaned_ledger_sweep_delay_s))
        self.dynamic.start_watch()
        log.info("Magnetar broker ready: pulsar://%s:%d, admin on port %s, data in %s",
                 config.bind_address, self.port, self.admin_port, data.resolve())

    async def _listen_tls(self) -> None:
        """pulsar+ssl on ``tls_port``: the same protocol behind TLS, client
        certificates verified against ``tls_trust_certs_file`` when given."""
        config = self.config
        try:
            ctx = tls.server_context(config.tls_certificate_file, config.tls_key_file, config.tls_trust_certs_file,
                                     config.tls_require_trusted_client_cert)
        except tls.TlsSetupError as exc:
            raise StartupError(str(exc)) from None
        try:
            self._tls_server = await asyncio.get_running_loop().create_server(
                lambda: ServerConnection(self.service), config.bind_address, config.tls_port, ssl=ctx,
                reuse_address=True)
        except OSError as exc:
            raise _busy("TLS (pulsar+ssl)", config.bind_address, config.tls_port, "tls_port", exc) from None
        self.tls_port = self._tls_server.sockets[0].getsockname()[1]

    async def _join_cluster(self) -> None:
        config = self.config
        member = self.service.cluster
        # Pulsar's broker id: host and web port.
        member.broker_id = member.info.broker_id = f"{config.advertised_address}:{self.admin_port}"
        member.info.service_url = config.service_url
        member.info.service_url_tls = self.service_url_tls
        member.info.web_service_url_tls = self.web_service_url_tls
        member.info.web_service_url = config.web_service_url
        member.info.listeners = config.listeners
        await member.start()
        log.info("broker %s joined cluster %s", member.broker_id, config.cluster_name)

    def _cluster_data(self) -> dict:
        """The cluster record (Pulsar's ClusterData) with this start's URLs;
        ``brokerServiceUrlTls`` / ``serviceUrlTls`` once the TLS listeners
        run (other regions' replicators with broker_client_tls_enabled use them)."""
        data = {
            "serviceUrl": f"http://{self.config.advertised_address}:{self.admin_port}",
            "brokerServiceUrl": self.config.service_url,
        }
        if self.service_url_tls:
            data["brokerServiceUrlTls"] = self.service_url_tls
        if self.web_service_url_tls:
            data["serviceUrlTls"] = self.web_service_url_tls
        return data

    @property
    def service_url_tls(self) -> str:
        """This broker's pulsar+ssl URL; "" while it has no TLS listener."""
        return f"pulsar+ssl://{self.config.advertised_address}:{self.tls_port}" if self.tls_port >= 0 else ""

    @property
    def web_service_url_tls(self) -> str:
        """This broker's https admin URL; "" while it has no https listener."""
        return f"https://{self.config.advertised_address}:{self.admin_tls_port}" if self.admin_tls_port >= 0 else ""

    async def stop(self) -> None:
        if self.dynamic is not None:
            self.dynamic.close()
        if self._server is not None:
            self._server.close()
        if self._tls_server is not None:
            self._tls_server.close()
        for extension in reversed(self.extensions):
            try:
                await extension.stop()
            except Exception:  # one extension's failure must not keep the rest from stopping
                log.exception("stopping %s failed", type(extension).__name__)
        self.extensions.clear()
        await stop_sweep(self.stats_sampling)
        if self.expiry is not None:
            await self.expiry.stop()
        if self.inactive_topics is not None:
            await self.inactive_topics.stop()
        for task in (self.quota_checks, self._orphan_sweep):
            if task is not None:
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
        crash_stop = False
        if self.service is not None and self.service.cluster is not None:
            await self.service.cluster.close()
            # Closing ledgers and snapshots writes metadata that cannot land:
            # stop as a crash would. Every receipt was given after its fsync,
            # and the bundles' next owner recovers the ledgers from disk.
            crash_stop = self.service.cluster.store_unreachable
        if self.service is not None:
            for cnx in list(self.service.connections):
                cnx.close()
            if crash_stop:
                log.warning("the metadata store is unreachable: stopping without the final metadata writes "
                            "(the topics' next owner recovers them from disk)")
                try:
                    await asyncio.wait_for(self.service.close(), 2.0)
                except (asyncio.TimeoutError, Exception):
                    pass
            else:
                await self.service.close()
        if self._admin is not None:
            await self._admin.stop()
        if self.factory is not None:
            if crash_stop:
                self.factory.abandon()
            else:
                await self.factory.close()
        if self.store is not None:
            await self.store.close()
        log.info("Magnetar broker stopped cleanly")


#: Allocations between two young-generation collections (CPython's default: 700).
GC_YOUNG_THRESHOLD = 20_000


def install_event_loop_policy() -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover (uvloop is a dependency; Windows lacks it)
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


async def serve(config: BrokerConfig, ready_line: bool = True, extensions: Sequence[ExtensionFactory] = (),
                admin: AdminApi | None = None) -> None:
    """Run a broker until SIGINT or SIGTERM."""
    broker = Broker(config, extensions, admin)
    await broker.start()
    # What start-up built (modules, config, admin app, loaded topics) lives as
    # long as the process: move it out of the collector's sight, so that a
    # full collection under load walks only what traffic created (a 25-35 ms
    # pause before, the largest single stall in the publish path).
    gc.collect()
    gc.freeze()
    # Each entry allocates a few short-lived objects (futures, callbacks,
    # receipts) that reference counting frees; the default young-generation
    # threshold (700) runs the collector every ~100 entries for nothing.
    # 20,000 cut the broker's CPU per unbatched entry by ~14% (bench/README.md,
    # "Collector thresholds"); a young collection of that size takes about 1 ms.
    young = int(os.environ.get("MAGNETAR_GC_YOUNG_THRESHOLD", GC_YOUNG_THRESHOLD))
    if young > 0:  # 0: keep CPython's thresholds (to compare)
        gc.set_threshold(young, 20, 100)
    # Before READY: a SIGTERM sent as soon as the line is read must stop the
    # broker cleanly, not kill it (the default action; seen on a loaded machine).
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, log_task_stacks)
    broker.request_stop = stop.set
    if ready_line:
        # Machine-readable: tests and scripts wait for this line.
        tls_part = f" tls={broker.tls_port}" if broker.tls_port >= 0 else ""
        if broker.admin_tls_port >= 0:
            tls_part += f" admin_tls={broker.admin_tls_port}"
        print(f"READY pulsar={broker.port} admin={broker.admin_port}{tls_part}", flush=True)
    try:
        await stop.wait()
    finally:
        await broker.stop()


def run(config: BrokerConfig, extensions: Sequence[ExtensionFactory] = (), admin: AdminApi | None = None) -> None:
    logging.basicConfig(
        level=getattr(logging, config.log_level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    install_event_loop_policy()
    asyncio.run(serve(config, extensions=extensions, admin=admin))

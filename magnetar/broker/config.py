"""Broker settings: defaults, the TOML file, and command-line overrides.

Precedence: command-line flags > the TOML file > the defaults below. Every
setting is documented in ``magnetar.example.toml`` (a unit test keeps it
complete); unknown keys in a file are an error (a typo must
not silently fall back to a default).

The ``[storage]`` table maps onto :class:`magnetar.storage.StorageConfig`.
"""
from __future__ import annotations

import dataclasses
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from magnetar.security.settings import SecuritySettings, SecuritySettingsError
from magnetar.storage.config import StorageConfig


#: brokerDeleteInactiveTopicsMode's values.
INACTIVE_TOPIC_MODES = ("delete_when_no_subscriptions", "delete_when_subscriptions_caught_up")
#: The longest lookup_timeout_s: past the clients' default operation timeout
#: (30 s) nobody is left to hear the answer.
MAX_LOOKUP_TIMEOUT_S = 30.0


class ConfigError(ValueError):
    """A setting is unknown or has a bad value."""


@dataclass
class BrokerConfig(SecuritySettings):
    """Every setting; the security ones (TLS, authentication, authorization)
    come from :class:`~magnetar.security.settings.SecuritySettings`."""

    #: Address the Pulsar protocol listener binds to.
    bind_address: str = "127.0.0.1"
    #: Pulsar protocol port (6650 is Pulsar's).
    port: int = 6650
    #: Admin HTTP port (REST, metrics); 0 picks a free port, -1 disables it.
    admin_port: int = 8080
    #: Host name clients are told to connect to (lookup answers, close redirects).
    advertised_address: str = "localhost"
    #: Named addresses clients choose with their ``listener_name``:
    #: "internal:pulsar://10.0.0.5:6650,external:pulsar+ssl://broker.example:6651"
    #: (Pulsar's advertisedListeners). Empty: the advertised address only.
    advertised_listeners: str = ""
    #: Where ledgers and the metadata database live.
    data_dir: str = "./data"
    #: Metadata store URL; empty means ``sqlite:<data_dir>/metadata.db``
    #: (standalone). ``etcd://HOST:PORT[/PREFIX]`` makes this broker a member
    #: of a cluster: bundles, owners and lookups (docs/cluster.md).
    metadata_store_url: str = ""
    #: Former name of ``metadata_store_url`` (still read).
    metadata_url: str = ""
    #: The store shared by all clusters (regions): clusters, tenants, namespace
    #: policies, partitioned-topic metadata. Empty means the metadata store
    #: (one cluster alone). ``etcd://HOST:PORT/PREFIX`` (docs/regions.md).
    configuration_store_url: str = ""
    #: Where managed ledgers' files live; empty means ``<data_dir>``. Every
    #: broker of a cluster must name the same (shared) directory.
    storage_dir: str = ""
    #: Replicated subscriptions (PIP-33): milliseconds between two snapshots
    #: of a topic (taken only while data flows and every region answers); a
    #: consumer that fails over sees again about this much traffic. Pulsar's
    #: replicatedSubscriptionsSnapshotFrequencyMillis.
    replicated_subscriptions_snapshot_frequency_ms: int = 1000
    #: Seconds a snapshot waits for every region's answer before it is
    #: abandoned (and the next may start). Pulsar's
    #: replicatedSubscriptionsSnapshotTimeoutSeconds.
    replicated_subscriptions_snapshot_timeout_s: float = 30.0
    #: Bundles (hash ranges of topic names) per namespace; ownership is per bundle.
    default_namespace_bundles: int = 4
    #: Seconds a broker's metadata session survives without a keepalive: how
    #: long a dead or paused broker keeps its bundles before they are reassigned.
    cluster_session_ttl_s: float = 10.0
    #: Seconds a lookup waits for a bundle in transition before ServiceNotReady
    #: ("try again": clients retry). Keep it well inside a client's share of its
    #: operation timeout per service host (30 s over 3 hosts: 10 s), or the
    #: client gives up on the broker before it hears the answer.
    lookup_timeout_s: float = 5.0
    #: A cluster member's clean stop (SIGTERM) first moves its bundles to the
    #: other brokers without client lookups (PIP-307; docs/operations.md).
    #: false: it frees them, and their clients look the topics up.
    drain_on_stop: bool = True
    #: Seconds that drain may take in all; bundles not moved by then are freed.
    drain_timeout_s: float = 20.0
    #: Move bundles without client lookups (PIP-307): the old owner holds its
    #: clients until the new one owns the bundle, then sends them its URL.
    #: false: the old way (disconnect; clients look the topic up again), as
    #: Pulsar's loadBalancerMultiPhaseBundleUnload.
    load_balancer_multi_phase_bundle_unload: bool = True
    #: After a move, the new owner waits this long (ms) before it dispatches a
    #: moved topic's messages, so the acknowledgements consumers grouped before
    #: the move (the official client sends them every 100 ms) arrive first and
    #: those messages are not sent again. 0: dispatch at once.
    load_balancer_transfer_dispatch_hold_ms: int = 200
    #: Let the leader move bundles from busy to idle brokers by itself (the shedder).
    load_balancer_enabled: bool = True
    #: Seconds between two load reports of a broker (CPU, memory, rates in and out per bundle) to the metadata store.
    load_balancer_report_interval_s: float = 5.0
    #: Seconds between two rounds of the leader's shedder.
    load_balancer_shedding_interval_s: float = 10.0
    #: Move a bundle when the busiest broker's message rate exceeds the idlest's by more than this fraction of it.
    load_balancer_load_threshold: float = 0.5
    #: Rounds in a row the spread must stay above the threshold before a move (Pulsar's loadBalancerSheddingConditionHitCountThreshold).
    load_balancer_shedding_cycles: int = 3
    #: Seconds after a move before the shedder moves a bundle from or to the same broker again.
    load_balancer_broker_cooldown_s: float = 60.0
    #: Let the leader split a bundle whose topic count or message rate passed the limits below (Pulsar's loadBalancerAutoBundleSplitEnabled).
    load_balancer_auto_bundle_split_enabled: bool = True
    #: Split a bundle with more loaded topics than this (loadBalancerNamespaceBundleMaxTopics).
    load_balancer_namespace_bundle_max_topics: int = 1000
    #: Split a bundle with a higher message rate in than this, msg/s (loadBalancerNamespaceBundleMaxMsgRate).
    load_balancer_namespace_bundle_max_msg_rate: float = 30000.0
    #: Never split a namespace into more bundles than this (loadBalancerNamespaceMaximumBundles).
    load_balancer_namespace_maximum_bundles: int = 128
    #: Name of this cluster.
    cluster_name: str = "standalone"
    #: Create a topic the first time a producer or consumer names it.
    allow_auto_topic_creation: bool = True
    #: Largest message (payload + metadata) a client may send, advertised in CONNECTED.
    max_message_size: int = 5 * 1024 * 1024
    #: Seconds between keepalive PINGs; a connection silent for 2x this is closed.
    keepalive_interval_s: float = 30.0
    #: Most entries one dispatcher read takes from storage.
    dispatcher_max_read_batch: int = 100
    #: Dispatch rates of a topic (all its subscriptions together) and of each
    #: subscription when neither the topic nor its namespace sets one, per
    #: second (Pulsar's dispatchThrottlingRatePerTopicInMsg / ...InByte and
    #: dispatchThrottlingRatePerSubscriptionInMsg / ...InByte); 0: no limit.
    dispatch_throttling_rate_per_topic_in_msg: int = 0
    dispatch_throttling_rate_per_topic_in_byte: int = 0
    dispatch_throttling_rate_per_subscription_in_msg: int = 0
    dispatch_throttling_rate_per_subscription_in_byte: int = 0
    #: Pulsar-style deduplication (producer name + sequence id) for namespaces
    #: whose policy does not say otherwise.
    deduplication_enabled: bool = False
    #: Entries between two snapshots of a topic's producer sequences.
    dedup_snapshot_interval_entries: int = 1000
    #: A leased producer id unused for this long (and out of lease) is dropped.
    pid_expiry_s: float = 7 * 24 * 3600.0
    #: Pulsar dedup forgets a producer name not attached and unused for this long.
    dedup_producer_inactivity_s: float = 6 * 3600.0
    #: Partitions of a topic created automatically (PARTITIONED_METADATA of an
    #: unknown topic); 0 creates non-partitioned topics.
    default_num_partitions: int = 0
    #: Seconds between two samples of every loaded topic's counters: admin
    #: stats report the rates of the last such interval (Pulsar's
    #: statsUpdateFrequencyInSecs, whose default is 60).
    stats_update_frequency_s: float = 10.0
    #: Seconds between two rounds of message TTL expiry (namespace messageTTL).
    message_expiry_check_interval_s: float = 60.0
    #: Seconds between two checks of every loaded topic against its namespace's
    #: backlog quotas (Pulsar's backlogQuotaCheckIntervalInSeconds); producers
    #: are also checked when they attach.
    backlog_quota_check_interval_s: float = 60.0
    #: How a new schema version must relate to the topic's latest one:
    #: BACKWARD, FORWARD, FULL (Pulsar's default) or ALWAYS_COMPATIBLE.
    schema_compatibility_strategy: str = "FULL"
    #: Refuse producers and consumers without a schema on topics that have one.
    schema_validation_enforced: bool = False
    #: Compact a topic once this many bytes were written since its last
    #: compaction (0: only when the admin API asks).
    compaction_threshold_bytes: int = 0
    #: Seconds between two checks of the compaction threshold.
    compaction_check_interval_s: float = 60.0
    #: Topics loading at once at most (a topic loads on first use: lookup,
    #: producer, consumer, admin call); the rest wait their turn. Pulsar's
    #: maxConcurrentTopicLoadRequest.
    max_concurrent_topic_loads: int = 256
    #: Seconds after start-up before a standalone broker sweeps ledger files
    #: no managed ledger names (a crash's leftovers). The sweep reads every
    #: managed ledger's metadata in the background, after the broker serves.
    orphaned_ledger_sweep_delay_s: float = 60.0
    #: Unload a loaded topic that has had no producer, consumer, replicator
    #: or traffic for this many seconds: its state is on disk and its next use
    #: loads it again, so memory follows the active topics. 0: never.
    topic_idle_unload_s: float = 300.0
    #: Delete topics that stay inactive (Pulsar's brokerDeleteInactiveTopicsEnabled;
    #: Pulsar's default is true, Magnetar's false: deleting data is opt-in).
    broker_delete_inactive_topics_enabled: bool = False
    #: Seconds between two rounds over the loaded topics that look for inactive
    #: and idle ones (brokerDeleteInactiveTopicsFrequencySeconds).
    broker_delete_inactive_topics_frequency_s: float = 60.0
    #: Which inactive topics go (brokerDeleteInactiveTopicsMode):
    #: "delete_when_no_subscriptions" (no producer, no subscription) or
    #: "delete_when_subscriptions_caught_up" (no producer or consumer, and no
    #: subscription has a backlog).
    broker_delete_inactive_topics_mode: str = "delete_when_no_subscriptions"
    #: Seconds a topic must stay inactive before it is deleted; 0: the
    #: frequency above (brokerDeleteInactiveTopicsMaxInactiveDurationSeconds).
    broker_delete_inactive_topics_max_inactive_duration_s: float = 0.0
    #: Series per topic (and subscription) at /metrics; false: per namespace
    #: only (Pulsar's exposeTopicLevelMetricsInPrometheus). Namespace
    #: aggregates are always there.
    expose_topic_level_metrics_in_prometheus: bool = True
    #: Log level (DEBUG, INFO, WARNING, ERROR).
    log_level: str = "INFO"
    storage: StorageConfig = field(default_factory=StorageConfig)

    @property
    def data_path(self) -> Path:
        return Path(self.data_dir)

    @property
    def resolved_metadata_url(self) -> str:
        return (self.metadata_store_url or self.metadata_url
                or f"sqlite:{self.data_path.resolve() / 'metadata.db'}")

    @property
    def clustered(self) -> bool:
        """A member of a cluster (the metadata store is shared), not standalone."""
        return self.resolved_metadata_url.startswith("etcd:")

    @property
    def separate_configuration_store(self) -> bool:
        """Clusters, tenants and namespace policies live in a store shared
        with other clusters (regions), not in this cluster's metadata store."""
        return bool(self.configuration_store_url) and self.configuration_store_url != self.resolved_metadata_url

    @property
    def storage_path(self) -> Path:
        return Path(self.storage_dir or self.data_dir)

    @property
    def web_service_url(self) -> str:
        return f"http://{self.advertised_address}:{self.admin_port}"

    @property
    def service_url(self) -> str:
        return f"pulsar://{self.advertised_address}:{self.port}"

    @property
    def listeners(self) -> dict[str, str]:
        """``advertised_listeners`` as name -> URL; ConfigError when malformed."""
        return parse_listeners(self.advertised_listeners)

    def validate(self) -> None:
        self.listeners  # noqa: B018 (parses: ConfigError when malformed)
        if not (0 <= self.port <= 65535):
            raise ConfigError(f"port must be 0..65535, got {self.port}")
        if not (-1 <= self.admin_port <= 65535):
            raise ConfigError(f"admin_port must be -1..65535, got {self.admin_port}")
        if self.max_message_size < 1024:
            raise ConfigError(f"max_message_size must be at least 1024 bytes, got {self.max_message_size}")
        if self.keepalive_interval_s <= 0:
            raise ConfigError("keepalive_interval_s must be positive")
        if self.dedup_snapshot_interval_entries < 1:
            raise ConfigError("dedup_snapshot_interval_entries must be at least 1")
        if self.pid_expiry_s <= 0:
            raise ConfigError("pid_expiry_s must be positive")
        if self.dedup_producer_inactivity_s <= 0:
            raise ConfigError("dedup_producer_inactivity_s must be positive")
        if not (0 <= self.default_num_partitions <= 1024):
            raise ConfigError(f"default_num_partitions must be 0..1024, got {self.default_num_partitions}")
        if self.stats_update_frequency_s <= 0:
            raise ConfigError("stats_update_frequency_s must be positive")
        if self.message_expiry_check_interval_s <= 0:
            raise ConfigError("message_expiry_check_interval_s must be positive")
        if self.backlog_quota_check_interval_s <= 0:
            raise ConfigError("backlog_quota_check_interval_s must be positive")
        if self.schema_compatibility_strategy not in ("BACKWARD", "FORWARD", "FULL", "ALWAYS_COMPATIBLE"):
            raise ConfigError("schema_compatibility_strategy must be BACKWARD, FORWARD, FULL or ALWAYS_COMPATIBLE, "
                              f"got {self.schema_compatibility_strategy!r}")
        if self.compaction_threshold_bytes < 0:
            raise ConfigError("compaction_threshold_bytes must be 0 (off) or positive")
        if self.compaction_check_interval_s <= 0:
            raise ConfigError("compaction_check_interval_s must be positive")
        if self.dispatcher_max_read_batch < 1:
            raise ConfigError("dispatcher_max_read_batch must be at least 1")
        if not 1 <= self.default_namespace_bundles <= 1024:
            raise ConfigError(f"default_namespace_bundles must be 1..1024, got {self.default_namespace_bundles}")
        if self.cluster_session_ttl_s < 1:
            raise ConfigError("cluster_session_ttl_s must be at least 1 second")
        if not 0 < self.lookup_timeout_s <= MAX_LOOKUP_TIMEOUT_S:
            raise ConfigError(f"lookup_timeout_s must be more than 0 and at most {MAX_LOOKUP_TIMEOUT_S:g} s (clients "
                              f"time a lookup out at 30 s by default), got {self.lookup_timeout_s}")
        if self.drain_timeout_s <= 0:
            raise ConfigError("drain_timeout_s must be positive")
        if not (0 < self.load_balancer_load_threshold < 1):
            raise ConfigError("load_balancer_load_threshold must be between 0 and 1")
        if min(self.load_balancer_report_interval_s, self.load_balancer_shedding_interval_s) <= 0:
            raise ConfigError("load_balancer_report_interval_s and load_balancer_shedding_interval_s must be positive")
        if self.load_balancer_namespace_bundle_max_topics < 1 or self.load_balancer_namespace_bundle_max_msg_rate <= 0:
            raise ConfigError("load_balancer_namespace_bundle_max_topics must be >= 1 and "
                              "load_balancer_namespace_bundle_max_msg_rate positive")
        if self.load_balancer_transfer_dispatch_hold_ms < 0:
            raise ConfigError("load_balancer_transfer_dispatch_hold_ms must be >= 0")
        if not 1 <= self.load_balancer_namespace_maximum_bundles <= 1024:
            raise ConfigError("load_balancer_namespace_maximum_bundles must be between 1 and 1024")
        if self.load_balancer_shedding_cycles < 1 or self.load_balancer_broker_cooldown_s < 0:
            raise ConfigError("load_balancer_shedding_cycles must be >= 1 and load_balancer_broker_cooldown_s >= 0")
        if self.replicated_subscriptions_snapshot_frequency_ms < 10:
            raise ConfigError("replicated_subscriptions_snapshot_frequency_ms must be at least 10")
        if self.replicated_subscriptions_snapshot_timeout_s <= 0:
            raise ConfigError("replicated_subscriptions_snapshot_timeout_s must be positive")
        if self.separate_configuration_store:
            if not self.clustered:
                raise ConfigError("configuration_store_url needs an etcd metadata_store_url: regions are "
                                  "clusters (magnetar broker / magnetar cluster up), not standalone brokers")
            if not self.configuration_store_url.startswith("etcd:"):
                raise ConfigError(f"configuration_store_url must be etcd://HOST:PORT/PREFIX, "
                                  f"got {self.configuration_store_url!r}")
        try:
            self.validate_security()
        except SecuritySettingsError as exc:
            raise ConfigError(str(exc)) from None
        if self.max_concurrent_topic_loads < 1:
            raise ConfigError("max_concurrent_topic_loads must be at least 1")
        if self.orphaned_ledger_sweep_delay_s < 0 or self.topic_idle_unload_s < 0:
            raise ConfigError("orphaned_ledger_sweep_delay_s and topic_idle_unload_s must be >= 0")
        if self.broker_delete_inactive_topics_frequency_s <= 0:
            raise ConfigError("broker_delete_inactive_topics_frequency_s must be positive")
        if self.broker_delete_inactive_topics_max_inactive_duration_s < 0:
            raise ConfigError("broker_delete_inactive_topics_max_inactive_duration_s must be >= 0 (0: the frequency)")
        if self.broker_delete_inactive_topics_mode not in INACTIVE_TOPIC_MODES:
            raise ConfigError("broker_delete_inactive_topics_mode must be " + " or ".join(INACTIVE_TOPIC_MODES)
                              + f", got {self.broker_delete_inactive_topics_mode!r}")
        if self.log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            raise ConfigError(f"log_level must be DEBUG, INFO, WARNING or ERROR, got {self.log_level!r}")


def _settings(target: Any, where: str = "") -> dict[str, str]:
    """Every setting of ``target`` by name -> its place (``"[storage]"`` or ``"the top level"``)."""
    found: dict[str, str] = {}
    for f in dataclasses.fields(target):
        value = getattr(target, f.name)
        if dataclasses.is_dataclass(value):
            found.update(_settings(value, f"{where}{f.name}."))
        else:
            found.setdefault(f.name, f"[{where.rstrip('.')}]" if where else "the top level")
    return found


def unknown_setting(root: Any, key: str, where: str) -> str:
    """One line for a key nobody reads: where it belongs if it is a setting
    of another section, else the closest names, else where the list is."""
    import difflib

    place = _settings(root).get(key)
    here = f"[{where.rstrip('.')}]" if where else "the top level"
    if place is not None and place != here:
        return f"unknown setting '{where}{key}': {key} belongs under {place}, not {here}"
    close = difflib.get_close_matches(key, list(_settings(root)), n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(close)}?" if close else "the settings are listed in magnetar.example.toml"
    return f"unknown setting '{where}{key}': {hint}"


def _apply(target: Any, values: dict[str, Any], where: str, root: Any = None) -> None:
    root = target if root is None else root
    names = {f.name: f for f in dataclasses.fields(target)}
    for key, value in values.items():
        if key not in names:
            raise ConfigError(unknown_setting(root, key, where))
        current = getattr(target, key)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, dict):
                raise ConfigError(f"{where}{key} must be a table")
            _apply(current, value, f"{where}{key}.", root)
            continue
        setattr(target, key, _coerce(names[key], value, where))


_TYPES = {"int": int, "float": float, "str": str, "bool": bool}


def _coerce(f: dataclasses.Field, value: Any, where: str) -> Any:
    """Check ``value`` against the field's declared type (an int is a fine float)."""
    kind = _TYPES.get(f.type if isinstance(f.type, str) else getattr(f.type, "__name__", ""))
    if kind is None:
        return value
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ConfigError(f"{where}{f.name} must be {kind.__name__}, got {value!r}")
    return value


def load_config(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> BrokerConfig:
    """Defaults, then the TOML file at ``path``, then ``overrides`` (None values skipped)."""
    config = BrokerConfig()
    if path is not None:
        try:
            data = tomllib.loads(Path(path).read_text())
        except FileNotFoundError:
            raise ConfigError(f"config file {path} does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
        _apply(config, data, "")
    _apply(config, {k: v for k, v in (overrides or {}).items() if v is not None}, "")
    config.validate()
    try:
        # StorageConfig validates on construction; rebuild it from the merged values.
        config.storage = StorageConfig(**dataclasses.asdict(config.storage))
    except ValueError as exc:
        raise ConfigError(f"[storage] {exc}") from None
    if config.storage.backend == "object" and not config.clustered:
        raise ConfigError('[storage] backend = "object" needs a cluster: its index lives in etcd '
                          "(magnetar broker --metadata-store etcd://... --object-store s3://...); "
                          'magnetar standalone keeps ledgers in files (backend = "file")')
    return config


def parse_listeners(text: str) -> dict[str, str]:
    """``"name:pulsar://host:port,other:pulsar+ssl://host:port"`` -> {name: URL}.

    One URL per name; ConfigError names the item that is wrong.
    """
    out: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, url = item.partition(":")
        if not sep or not re.fullmatch(r"[A-Za-z0-9_.-]+", name or "") or \
                not re.fullmatch(r"pulsar(\+ssl)?://[^/:,\s]+:\d+", url):
            raise ConfigError(f"advertised_listeners item {item!r} must be name:pulsar://HOST:PORT "
                              f"(or pulsar+ssl://)")
        if name in out:
            raise ConfigError(f"advertised_listeners names {name!r} twice: one URL per listener")
        out[name] = url
    return out

"""Settings changed without a restart (Pulsar's dynamic configuration).

The settings of :data:`DYNAMIC` (those Pulsar marks ``dynamic = true`` in
its ServiceConfiguration that Magnetar has: rates, limits, load-manager
thresholds) may be changed on a running broker. Overrides live in the
metadata store under ``/admin/configuration`` (Pulsar's path), one record
for the cluster: ``{"format": 1, "values": {name: value}}``. Every broker
reads it when it starts (an override wins over the config file) and
watches it, so a change made through any broker reaches all of them; a
removed override puts the file's value back. Every other setting answers
that it needs a restart.

Pulsar's camelCase names are accepted for the settings that mean the same
in the same unit (:data:`PULSAR_NAMES`).

Failure modes: :class:`DynamicConfigError` (one line) for an unknown name,
a setting that needs a restart, or a value of the wrong type or range;
nothing is written then. A record in a newer format than this broker knows
is refused at start (:class:`NewerFormatError`, from
:mod:`magnetar.formats`) and ignored by the watch (logged).
"""
from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from typing import Any, Callable

from magnetar.broker.config import BrokerConfig, ConfigError
from magnetar.metadata import MetadataStore
from magnetar.metadata.store import BadVersion, KeyNotFound

log = logging.getLogger(__name__)

PATH = "/admin/configuration"
#: The format of the record this code writes; a record without one is format 1.
FORMAT = 1

#: The settings that change without a restart.
DYNAMIC = (
    "dispatch_throttling_rate_per_topic_in_msg",
    "dispatch_throttling_rate_per_topic_in_byte",
    "dispatch_throttling_rate_per_subscription_in_msg",
    "dispatch_throttling_rate_per_subscription_in_byte",
    "dispatcher_max_read_batch",
    "allow_auto_topic_creation",
    "broker_delete_inactive_topics_enabled",
    "broker_delete_inactive_topics_frequency_s",
    "broker_delete_inactive_topics_mode",
    "broker_delete_inactive_topics_max_inactive_duration_s",
    "load_balancer_enabled",
    "load_balancer_report_interval_s",
    "load_balancer_shedding_interval_s",
    "load_balancer_load_threshold",
    "load_balancer_shedding_cycles",
    "load_balancer_broker_cooldown_s",
    "load_balancer_auto_bundle_split_enabled",
    "load_balancer_namespace_bundle_max_topics",
    "load_balancer_namespace_bundle_max_msg_rate",
    "load_balancer_namespace_maximum_bundles",
    "drain_timeout_s",
)

#: Pulsar's names of the dynamic settings that mean the same, in the same unit.
PULSAR_NAMES = {
    "dispatchThrottlingRatePerTopicInMsg": "dispatch_throttling_rate_per_topic_in_msg",
    "dispatchThrottlingRatePerTopicInByte": "dispatch_throttling_rate_per_topic_in_byte",
    "dispatchThrottlingRatePerSubscriptionInMsg": "dispatch_throttling_rate_per_subscription_in_msg",
    "dispatchThrottlingRatePerSubscriptionInByte": "dispatch_throttling_rate_per_subscription_in_byte",
    "dispatcherMaxReadBatchSize": "dispatcher_max_read_batch",
    "allowAutoTopicCreation": "allow_auto_topic_creation",
    "brokerDeleteInactiveTopicsEnabled": "broker_delete_inactive_topics_enabled",
    "brokerDeleteInactiveTopicsFrequencySeconds": "broker_delete_inactive_topics_frequency_s",
    "brokerDeleteInactiveTopicsMode": "broker_delete_inactive_topics_mode",
    "brokerDeleteInactiveTopicsMaxInactiveDurationSeconds": "broker_delete_inactive_topics_max_inactive_duration_s",
    "loadBalancerSheddingEnabled": "load_balancer_enabled",
    "loadBalancerSheddingConditionHitCountThreshold": "load_balancer_shedding_cycles",
    "loadBalancerAutoBundleSplitEnabled": "load_balancer_auto_bundle_split_enabled",
    "loadBalancerNamespaceBundleMaxTopics": "load_balancer_namespace_bundle_max_topics",
    "loadBalancerNamespaceBundleMaxMsgRate": "load_balancer_namespace_bundle_max_msg_rate",
    "loadBalancerNamespaceMaximumBundles": "load_balancer_namespace_maximum_bundles",
}


class DynamicConfigError(ValueError):
    pass


def _fields() -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(BrokerConfig)}


def canonical(name: str) -> str:
    """Magnetar's name of setting ``name`` (Pulsar's accepted); DynamicConfigError
    for an unknown one or one that needs a restart."""
    name = PULSAR_NAMES.get(name, name)
    fields = _fields()
    if name not in fields or name == "storage":
        raise DynamicConfigError(f"unknown setting {name!r}: the settings are listed in magnetar.example.toml")
    if name not in DYNAMIC:
        raise DynamicConfigError(f"{name} needs a restart: change it in the config file and restart the broker "
                                 f"(dynamic settings: magnetar admin brokers list-dynamic-config)")
    return name


def parse_value(name: str, text: Any, base: BrokerConfig) -> Any:
    """``text`` (a string from the CLI or REST path, or a JSON value) as the
    type of setting ``name``, checked by the config's own validation
    against ``base`` with it applied; DynamicConfigError if it does not fit."""
    default = getattr(base, name)
    try:
        if isinstance(default, bool):
            if isinstance(text, bool):
                value = text
            elif str(text).strip().lower() in ("true", "false"):
                value = str(text).strip().lower() == "true"
            else:
                raise ValueError("true or false")
        elif isinstance(default, int):
            value = int(str(text).strip())
        elif isinstance(default, float):
            value = float(str(text).strip())
        else:
            value = str(text)
    except ValueError as exc:
        raise DynamicConfigError(f"{name} takes {type(default).__name__} values, not {text!r}"
                                 + (f" ({exc})" if "true or false" in str(exc) else "")) from None
    trial = dataclasses.replace(base, **{name: value})
    try:
        trial.validate()
    except ConfigError as exc:
        raise DynamicConfigError(f"{name} = {value!r}: {exc}") from None
    return value


def decode(raw: bytes) -> dict[str, Any]:
    """The overrides of a stored record; a record without ``format`` is format 1.
    Raises NewerFormatError for a later format, DynamicConfigError if unreadable."""
    from magnetar.formats import check_format

    try:
        doc = json.loads(raw)
        if not isinstance(doc, dict):
            raise ValueError("not an object")
    except ValueError as exc:
        raise DynamicConfigError(f"unreadable dynamic configuration record at {PATH}: {exc}") from None
    check_format("dynamic configuration", PATH, doc.get("format", 1), FORMAT)
    values = doc.get("values", {})
    return values if isinstance(values, dict) else {}


class DynamicConfig:
    """The overrides of one broker's ``config``: read at :meth:`start`, kept
    current by a watch; ``on_change(names)`` is called after settings changed
    (the broker re-applies what it copied from them)."""

    def __init__(self, store: MetadataStore, config: BrokerConfig,
                 on_change: Callable[[set[str]], Any] | None = None) -> None:
        self.store = store
        self.config = config
        self.on_change = on_change
        #: The values of the config file (what a removed override goes back to).
        self.file_values = {name: getattr(config, name) for name in DYNAMIC}
        self.overrides: dict[str, Any] = {}
        self._watch = None
        self._reading: asyncio.Task | None = None

    async def load(self) -> set[str]:
        """Read the record and apply it; the names whose value changed."""
        record = await self.store.get(PATH)
        stored = decode(record.value) if record is not None else {}
        return self._apply(stored)

    def start_watch(self) -> None:
        self._watch = self.store.watch(PATH, lambda note: self._schedule())

    def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None

    def _schedule(self) -> None:
        if self._reading is None or self._reading.done():
            self._reading = asyncio.get_running_loop().create_task(self._reload())

    async def _reload(self) -> None:
        try:
            changed = await self.load()
        except Exception as exc:  # a bad record is logged; the settings in force stay
            log.error("cannot apply the dynamic configuration: %s", exc)
            return
        if changed:
            log.info("dynamic configuration applied: %s",
                     ", ".join(f"{n} = {getattr(self.config, n)!r}" for n in sorted(changed)))
            if self.on_change is not None:
                result = self.on_change(changed)
                if asyncio.iscoroutine(result):
                    await result

    def _apply(self, stored: dict[str, Any]) -> set[str]:
        wanted = dict(self.file_values)
        overrides = {}
        for name, value in stored.items():
            if name in DYNAMIC:
                try:
                    wanted[name] = parse_value(name, value, self.config)
                    overrides[name] = wanted[name]
                except DynamicConfigError as exc:
                    log.error("ignoring a stored dynamic setting: %s", exc)
        changed = {n for n, v in wanted.items() if getattr(self.config, n) != v}
        for name in changed:
            setattr(self.config, name, wanted[name])
        self.overrides = overrides
        return changed

    async def _write(self, change: Callable[[dict], None]) -> None:
        for _ in range(20):  # compare-and-set against other brokers' updates
            record = await self.store.get(PATH)
            values = dict(decode(record.value)) if record is not None else {}
            change(values)
            raw = json.dumps({"format": FORMAT, "values": values}, sort_keys=True).encode()
            try:
                await self.store.put(PATH, raw, expected_version=record.version if record is not None else -1)
            except (BadVersion, KeyNotFound):
                continue
            await self._reload()  # this broker applies it at once; the others by their watch
            return
        raise DynamicConfigError("the dynamic configuration kept changing under this update: try again")

    async def update(self, name: str, text: Any) -> tuple[str, Any]:
        """Set ``name`` (Pulsar's name accepted) to ``text`` for every broker;
        returns Magnetar's name and the value set."""
        name = canonical(name)
        value = parse_value(name, text, self.config)
        await self._write(lambda values: values.__setitem__(name, value))
        return name, value

    async def delete(self, name: str) -> str:
        """Remove the override of ``name``: every broker goes back to its file's value."""
        name = canonical(name)
        if name not in self.overrides:
            record = await self.store.get(PATH)
            if record is None or name not in decode(record.value):
                raise DynamicConfigError(f"{name} has no dynamic value to delete")
        await self._write(lambda values: values.pop(name, None))
        return name

    def runtime(self) -> dict[str, Any]:
        """Every setting's value in force now (dynamic overrides applied)."""
        out = {}
        for f in dataclasses.fields(self.config):
            value = getattr(self.config, f.name)
            out[f.name] = dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value
        return out

"""Putting changed dynamic settings (:mod:`magnetar.broker.dynamic_config`)
into effect in a running broker.

Most settings are read from the config where they are used, so the new
value applies from the next use; this re-applies the ones a part copied
when it started: the topics' dispatch rates (from the broker defaults), the
inactive-topic sweep (its period and rules), the load manager's settings
(the member's report period, the leader's shedder and automatic split), and
the drain's bound. Failure modes: an error in one part is logged and the
others still apply.
"""
from __future__ import annotations

import logging

log = logging.getLogger(__name__)


async def apply(broker, names: set[str]) -> None:
    """Bring ``broker`` (a :class:`.server.Broker`) in line with its config
    after the settings ``names`` changed."""
    config, service = broker.config, broker.service
    if service is None:
        return  # not started yet: what starts next reads the config
    try:
        if any(n.startswith("dispatch_throttling_") for n in names):
            await service.refresh_all_policies()
        if any(n.startswith("broker_delete_inactive_topics_") for n in names) and broker.inactive_topics is not None:
            from magnetar.broker.policies.inactive import InactiveTopics

            await broker.inactive_topics.stop()
            broker.inactive_topics = InactiveTopics(service, config).start()
        member = service.cluster
        if member is not None and (any(n.startswith("load_balancer_") for n in names) or "drain_timeout_s" in names):
            from magnetar.broker.cluster.leader import SheddingSettings, SplitSettings

            member.report_interval_s = config.load_balancer_report_interval_s
            member.shedding = SheddingSettings(config.load_balancer_enabled, config.load_balancer_shedding_interval_s,
                                               config.load_balancer_load_threshold,
                                               config.load_balancer_shedding_cycles,
                                               config.load_balancer_broker_cooldown_s)
            member.auto_split = SplitSettings(config.load_balancer_auto_bundle_split_enabled,
                                              config.load_balancer_namespace_bundle_max_topics,
                                              config.load_balancer_namespace_bundle_max_msg_rate,
                                              config.load_balancer_namespace_maximum_bundles)
            if member.leader is not None:
                member.leader.shedding, member.leader.auto_split = member.shedding, member.auto_split
            if member.drain_on_stop is not None:
                member.drain_on_stop = (config.drain_timeout_s, min(10.0, config.drain_timeout_s))
    except Exception:
        log.exception("applying dynamic settings %s failed", ", ".join(sorted(names)))

"""The brokers of a chaos run: the harness's broker processes
(:mod:`magnetar_harness.broker`) with the run's settings, and the faults
done to them:

- ``kill``: SIGKILL, then a restart on the same data (durability and
  recovery: every receipt it gave must survive);
- ``pause``: SIGSTOP for a while, then SIGCONT (clients time out, resend);
- ``restart``: SIGTERM (a clean stop), then a start.

Every process a chaos run starts (brokers, etcd, strace) dies with the run
(:func:`magnetar_harness.lifetime.dying_with_parent`): a run that is itself
SIGKILLed leaves nothing running behind it. Ports are picked before the
first start (the proxies in front of a broker need them) and kept.

Failure modes: a broker that does not print READY within
:data:`START_TIMEOUT_S` raises BrokerDidNotStart with the tail of its log.
"""
from __future__ import annotations

from pathlib import Path

from magnetar_harness.broker import BrokerProcess, member_broker
from magnetar_harness.broker import standalone_broker as harness_standalone_broker
from magnetar_harness.ports import free_port

START_TIMEOUT_S = 60.0


def _run_settings() -> dict:
    return dict(port=free_port(), admin_port=free_port(), start_timeout=START_TIMEOUT_S, die_with_parent=True)


def standalone_broker(data_dir: Path, extra_args: list[str] | None = None) -> BrokerProcess:
    """``magnetar standalone`` on ``data_dir`` (log ``broker.log`` next to it)."""
    data_dir = Path(data_dir)
    return harness_standalone_broker(data_dir, extra_args, log_path=data_dir.parent / "broker.log", **_run_settings())


def cluster_broker(base: Path, index: int, store_url: str, session_ttl: float, address: str = "127.0.0.1",
                   netns: str | None = None, config: Path | None = None) -> BrokerProcess:
    """Member ``index`` of the run's cluster ("chaos"), perhaps in network
    namespace ``netns`` listening on and advertising ``address``."""
    return member_broker("chaos", base, index, store_url, session_ttl, address=address, netns=netns, config=config,
                         **_run_settings())


def region_broker(base: Path, name: str, store_url: str, configuration_store: str, config: Path,
                  session_ttl: float, bind: str | None = None) -> BrokerProcess:
    """Region ``name``'s one broker, with ``magnetar geo up``'s command line;
    advertising 127.0.0.1 but listening on ``bind`` if given."""
    return member_broker(name, base, 0, store_url, session_ttl, configuration_store=configuration_store,
                         config=config, bind=bind, **_run_settings())

"""The faults a chaos run can inject: one registry, read by the systems,
the runner and the CLI.

Each :class:`Fault` has its name, the topologies that take it, the help
``--faults`` prints, and (for faults added here) how it is injected. A new
fault is one entry in this file: write its function and register it with
:func:`fault`; ``inject(system, rng)`` gets the running system (the
topology's class in :mod:`.systems` or :mod:`.regions`: its ``brokers``,
``etcd``, ``objectstore``...) and returns, once healed, the line the
history records. The systems take it from :func:`faults_of`, the runner
injects it through :func:`inject`, the CLI's help comes from
:func:`faults_help`.

The faults listed first below were written before the registry: their
code is a branch of their system's ``inject`` (marked ``BUILT_IN``).

Failure modes: :func:`inject` raises KeyError for a name not registered
(the runner refuses unknown faults before anything starts).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable

#: ``inject(system, rng) -> what happened``, returning once healed.
Injector = Callable[[Any, random.Random], str]

STANDALONE, CLUSTER, REGIONS, HOSTS = "standalone", "cluster", "regions", "hosts"


@dataclass(frozen=True)
class Fault:
    name: str
    topologies: tuple[str, ...]
    help: str
    #: None: a branch of the system's own ``inject`` (:data:`BUILT_IN`).
    inject: Injector | None = None


#: Every fault by name, in the order ``--faults`` lists them.
FAULTS: dict[str, Fault] = {}


def register(name: str, topologies: tuple[str, ...], help: str, inject: Injector | None = None) -> Fault:
    if name in FAULTS:
        raise ValueError(f"fault {name!r} is registered twice")
    FAULTS[name] = entry = Fault(name, topologies, help, inject)
    return entry


def fault(name: str, topologies: tuple[str, ...], help: str) -> Callable[[Injector], Injector]:
    """Register the decorated ``inject(system, rng)`` as the fault ``name``."""
    def decorate(inject: Injector) -> Injector:
        register(name, topologies, help, inject)
        return inject
    return decorate


def faults_of(topology: str) -> tuple[str, ...]:
    """The names of the faults ``topology`` takes."""
    return tuple(f.name for f in FAULTS.values() if topology in f.topologies)


def inject(system: Any, kind: str, rng: random.Random) -> str:
    """Inject ``kind`` into ``system``; returns once healed."""
    entry = FAULTS[kind]
    if entry.inject is None:
        return system.inject(kind, rng)
    return entry.inject(system, rng)


def faults_help() -> str:
    """The ``--faults`` help: each topology's faults, with what they do
    (said once, where a fault first appears)."""
    parts = []
    told = set()
    for topology in (STANDALONE, CLUSTER, REGIONS, HOSTS):
        names = [f"{f.name} ({f.help})" if f.help and f.name not in told else f.name
                 for f in FAULTS.values() if topology in f.topologies]
        told.update(f.name for f in FAULTS.values() if topology in f.topologies)
        parts.append(f"{topology}: " + ", ".join(names))
    return "Comma-separated; " + "; ".join(parts)


# -- built in: a branch of their system's inject ------------------------------------------

_ALL = (STANDALONE, CLUSTER, REGIONS)
BUILT_IN = [
    ("kill", _ALL, "SIGKILL, restarted 0.5-2 s later"),
    ("pause", _ALL, "SIGSTOP, then SIGCONT"),
    ("restart", _ALL, "SIGTERM, restarted"),
    ("cut", (STANDALONE, REGIONS), "standalone: every client connection cut; regions: the link to the "
                                   "second region down 1-4 s"),
    ("disk-full", (STANDALONE,), "the data directory filled 1-3 s; root"),
    ("kill-etcd", (CLUSTER, REGIONS), "restarted on the same data 1-3 s later"),
    ("pause-etcd", (CLUSTER, REGIONS), "SIGSTOP 1-4 s"),
    ("partition", (CLUSTER,), "a broker cut off past its session; root"),
    ("fsync-error", (STANDALONE, CLUSTER), "EIO from fsync for 1-3 s; needs ptrace: root or CAP_SYS_PTRACE"),
    ("move", (CLUSTER,), "a workload topic's bundle unloaded to another broker"),
    ("move-kill", (CLUSTER,), "the same, its destination killed mid-handover"),
    ("move-kill-source", (CLUSTER,), "its source killed mid-handover"),
    ("move-pause-source", (CLUSTER,), "the owner paused past its session mid-handover"),
    ("move-partition-source", (CLUSTER,), "root"),
    ("move-partition-destination", (CLUSTER,), "root"),
    ("split", (CLUSTER,), "the bundle cut in two"),
    ("split-kill", (CLUSTER,), "the owner killed mid-split"),
    ("clock-jump", (STANDALONE, CLUSTER), "a broker's wall clock steps +90 s, +10 min, +2 h, +8 d, -30 s or "
                                          "-10 min, held 3-6 s or left; libfaketime, installed when root"),
    ("kill-objectstore", (CLUSTER,), "needs --storage object"),
    ("pause-objectstore", (CLUSTER,), "needs --storage object"),
    ("kill-wipe", (CLUSTER,), "a broker killed and its data directory deleted; needs --storage object"),
    ("cut-objectstore", (CLUSTER,), "a broker cut from the object store only, 2-12 s; root; "
                                    "needs --storage object"),
    ("failover", (REGIONS,), "the consumer of a replicated subscription moves to the other region"),
]
for _name, _topologies, _help in BUILT_IN:
    register(_name, _topologies, _help)


# -- faults added since: one function each ------------------------------------------------

# The hosts topology's faults (a network between machines) register themselves there.
from . import host_faults  # noqa: E402,F401

"""The garbage collector's pauses in a broker, and what its middle passes walk.

A bench asks for it (``bench.object_latency --gc-census PREFIX``); a broker
never imports it. :func:`hook_env` gives the environment that loads it into
the brokers a ``cluster up`` starts: ``PYTHONPATH`` gets
``bench/gc_census_hook/``, whose ``sitecustomize.py`` loads this file by its
path (so a peer checkout's broker, which has no such module, gets it too)
and calls :func:`install` when the process is a broker.

Once installed, through ``gc.callbacks``:

- every collection is timed: ``(monotonic start, generation, pause ms,
  collected)``; the clock is the system's, so a bench can keep the
  collections of its own sending window (:func:`window`);
- at each collection of generation 1 or 2 (the first
  ``MAGNETAR_GC_CENSUS_COUNTS`` of them, default 20; only once the file
  ``MAGNETAR_GC_CENSUS_FROM`` exists, if that is set: a bench creates it
  when its sending starts), before the collector starts, a census: the
  tracked objects of the generations it will walk (0 and 1; 2 as well at a
  full one) by type, and in the first ``MAGNETAR_GC_CENSUS_HOLDERS``
  (default 1) of them, for the largest kinds, who holds a sample of them
  (``Type.attr``, ``dict['key'] <- Type``...). The census runs before the
  pause's clock starts: the pause figures are the collector's alone. The
  broker is stalled for it though (the holders' lookup walks every tracked
  object: seconds at 10,000 topics; the count alone some 0.1 s), so a run
  with counts is for finding what is walked, not for latency figures:
  pass 0 for those.
- at ``MAGNETAR_GC_CENSUS_YOUNG`` young collections (generation 0; none
  by default) once the counts may start, past the first
  ``MAGNETAR_GC_CENSUS_YOUNG_SKIP`` (default 2: the sending's first
  second makes each producer's state): the tracked objects of generation
  1 by type (what earlier young collections kept and is still alive) and
  how each type grew since the previous such count (``grown``: what the
  young collections between them kept); at the last of them, who holds
  a sample of the kinds that grew most (the holders' lookup stalls the
  broker for seconds: only the last, so the earlier counts are of a
  sending undisturbed by it).

The summary is written (JSON) to ``MAGNETAR_GC_CENSUS`` (``{pid}`` in it is
the process id) after each census, every :data:`WRITE_EVERY_S` seconds when
collections were added (a thread: a broker of 10,000 topics may be killed
before its ``atexit`` runs), and at exit.
"""
from __future__ import annotations

import atexit
import gc
import json
import os
import sys
import threading
import time
import types
from collections import Counter
from pathlib import Path

#: Where the hook's ``sitecustomize.py`` lives (put on the broker's ``PYTHONPATH``).
HOOK_DIR = Path(__file__).resolve().parent / "gc_census_hook"
#: Kinds whose holders are looked up at each census, and objects sampled per kind.
HOLDER_KINDS, HOLDER_SAMPLE = 6, 200
#: At most this many collections are kept (a broker's days would otherwise grow it).
KEPT = 200_000
#: Seconds between two writes of the summary by the writer thread.
WRITE_EVERY_S = 2.0
CONTAINERS = (list, tuple, dict, set, frozenset)


def hook_env(path: str, counts: int = 20, holders: int = 1, counts_from: str | None = None,
             young: int = 0, young_skip: int = 2) -> dict[str, str]:
    """The environment to add to a ``cluster up``'s (``LocalCluster(env=)``,
    which keeps a peer's root first on ``PYTHONPATH``) that installs the
    census in its brokers and writes it to ``path``; ``counts_from``: a
    file whose creation starts the counts (none: from the start);
    ``young``: how many young collections to count (after ``young_skip``)."""
    return {"PYTHONPATH": str(HOOK_DIR), "MAGNETAR_GC_CENSUS": path,
            "MAGNETAR_GC_CENSUS_COUNTS": str(counts), "MAGNETAR_GC_CENSUS_HOLDERS": str(holders),
            "MAGNETAR_GC_CENSUS_YOUNG": str(young), "MAGNETAR_GC_CENSUS_YOUNG_SKIP": str(young_skip),
            **({"MAGNETAR_GC_CENSUS_FROM": counts_from} if counts_from else {})}


def is_broker(argv: list[str]) -> bool:
    """Whether ``sys.orig_argv`` is a broker's (``-m magnetar.cli broker|standalone``,
    or the ``magnetar`` script's)."""
    at = next((i for i, word in enumerate(argv) if word == "magnetar.cli" or Path(word).name == "magnetar"), None)
    return at is not None and argv[at + 1:at + 2] in (["broker"], ["standalone"])


def kind(obj: object) -> str:
    t = type(obj)
    return t.__qualname__ if t.__module__ in ("builtins", None) else f"{t.__module__}.{t.__qualname__}"


def holder(container: object, target: object) -> str:
    """How ``container`` holds ``target``, briefly: ``Type.attr``,
    ``dict['key']``, ``list``..."""
    if isinstance(container, dict):
        for key, value in container.items():
            if value is target:
                return f"dict[{key!r:.40}]" if isinstance(key, str) else f"dict[{kind(key)}]"
        return "dict(key)"
    if isinstance(container, CONTAINERS) or type(container).__name__ == "deque":
        return kind(container)
    if isinstance(container, types.FrameType):
        return f"frame {container.f_code.co_name}"
    names = getattr(container, "__dict__", None)
    if isinstance(names, dict):
        for key, value in names.items():
            if value is target:
                return f"{kind(container)}.{key}"
    for cls in type(container).__mro__:
        for slot in cls.__dict__.get("__slots__", ()):
            if getattr(container, slot, None) is target:
                return f"{kind(container)}.{slot}"
    return kind(container)


def holders(sample: list, skip: set[int]) -> dict[int, list[tuple[object, str]]]:
    """For each object of ``sample`` (by id), its referrers and how they hold
    it, in one pass of ``gc.get_referrers`` (which sees tracked, not frozen,
    objects)."""
    wanted = {id(x): x for x in sample}
    found: dict[int, list[tuple[object, str]]] = {}
    refs = gc.get_referrers(*sample)
    skip = skip | {id(wanted), id(found), id(refs), id(sample)}
    for ref in refs:
        if id(ref) in skip or isinstance(ref, types.FrameType) or (
                type(ref) is tuple and len(ref) == len(sample) and ref[0] is sample[0]):  # the call's arguments
            continue
        for inner in gc.get_referents(ref):
            if id(inner) in wanted:
                found.setdefault(id(inner), []).append((ref, holder(ref, inner)))
    return found


def census(generations: tuple[int, ...], with_holders: bool = True, before: Counter | None = None) -> dict:
    """The tracked objects of ``generations`` by kind (the 30 largest), and,
    for the :data:`HOLDER_KINDS` largest (if ``with_holders``), how an even
    sample of each is held (two levels: ``list <- Type.attr``). With
    ``before`` (an earlier ``by_kind_all``): how each kind grew since
    (``grown``), and the holders are those of the kinds that grew most."""
    began = time.perf_counter()
    objs = [o for g in generations for o in gc.get_objects(g)]
    kinds = list(map(kind, objs))
    by_kind = Counter(kinds)
    by_kind["list"] -= 1  # objs itself
    total = len(objs) - 1
    out = {"generations": list(generations), "objects": total, "by_kind": dict(by_kind.most_common(30)),
           "holders": {}, "sampled": {}, "census_ms": 0.0}
    top = None
    if before is not None:
        grown = by_kind - before
        out["grown"] = dict(grown.most_common(15))
        out["by_kind_all"] = by_kind
        top = dict(grown.most_common(HOLDER_KINDS))
    if with_holders:
        out["holders"], out["sampled"] = held_by(objs, kinds, by_kind, top)
    objs.clear()  # it lists itself (it was in generation 0 when listed): a cycle that would hold them all
    out["census_ms"] = round((time.perf_counter() - began) * 1000, 1)
    return out


def held_by(objs: list, kinds: list[str], by_kind: Counter, grown: dict[str, int] | None = None) -> tuple[dict, dict]:
    """For the largest kinds, how an even sample of :data:`HOLDER_SAMPLE` of
    each is held; and how many were sampled. With ``grown`` (kind: n), the
    sample is of those kinds' last n objects in ``objs`` (a generation
    lists its newest last: the ones kept since the previous count)."""
    if grown:
        top, every = list(grown), {name: max(1, n // HOLDER_SAMPLE) for name, n in grown.items()}
        skipped = {name: by_kind[name] - n for name, n in grown.items()}
    else:
        top = [name for name, _ in by_kind.most_common(HOLDER_KINDS)]
        every = {name: max(1, by_kind[name] // HOLDER_SAMPLE) for name in top}
        skipped = dict.fromkeys(top, 0)
    samples: dict[str, list] = {name: [] for name in top}
    seen = {name: -skipped[name] for name in top}
    for at, name in enumerate(kinds):  # every n-th of each kind: old and young alike
        n = seen.get(name)
        if n is None:
            continue
        seen[name] = n + 1
        if n >= 0 and n % every[name] == 0 and objs[at] is not objs:
            bucket = samples[name]
            if len(bucket) < HOLDER_SAMPLE:
                bucket.append(objs[at])
    sample = [x for bucket in samples.values() for x in bucket]
    skip = {id(samples), id(objs), *map(id, samples.values())}
    first = holders(sample, skip)
    parents = [ref for refs in first.values() for ref, _ in refs
               if isinstance(ref, CONTAINERS) or type(ref).__name__ == "deque"]
    skip |= {id(first), id(parents)} | {id(refs) for refs in first.values()} | {
        id(pair) for refs in first.values() for pair in refs}
    second = holders(parents, skip) if parents else {}
    chains: dict[str, Counter] = {}
    for name, bucket in samples.items():
        counted = chains.setdefault(name, Counter())
        for obj in bucket:
            for ref, how in first.get(id(obj), [("?", "no tracked holder")]):
                ups = sorted(second.get(id(ref), []), 
                             key=lambda up: isinstance(up[0], CONTAINERS))  # an object's attribute first
                counted[f"{how} <- {ups[0][1]}" if ups else how] += 1
    return ({name: dict(counted.most_common(6)) for name, counted in chains.items()},
            {name: len(bucket) for name, bucket in samples.items()})


class Census:
    """The ``gc.callbacks`` entry: times collections, counts at the first
    ``counts`` middle or full ones (and at ``young`` young ones past the
    first ``young_skip``), writes to ``path``."""

    def __init__(self, path: str, counts: int, holders: int = 1, counts_from: str | None = None,
                 young: int = 0, young_skip: int = 2) -> None:
        self.path, self.counts = path.replace("{pid}", str(os.getpid())), counts
        self.holders, self.counts_from = holders, counts_from
        self.young, self.young_skip, self.young_seen = young, young_skip, 0
        self.young_kinds: Counter | None = None
        self.collections: list[tuple[float, int, float, int]] = []
        self.censuses: list[dict] = []
        self.started = 0.0
        self.at = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            generation = info["generation"]
            if generation >= 1 and len(self.censuses) < self.counts and (
                    self.counts_from is None or os.path.exists(self.counts_from)):
                found = census((0, 1, 2) if generation == 2 else (0, 1), len(self.censuses) < self.holders)
                found.update(at=time.monotonic(), generation=generation)
                self.censuses.append(found)
                self.write()
            elif generation == 0 and self.young and (self.counts_from is None or os.path.exists(self.counts_from)):
                self.young_seen += 1
                if self.young_skip < self.young_seen <= self.young_skip + self.young:
                    last = self.young_seen == self.young_skip + self.young
                    # What this young collection walks (tracked), beside what
                    # started it (objects allocated less freed since the last
                    # one, tracked or not: an untracked object kept alive
                    # counts toward the threshold but is never walked).
                    walked, allocated = len(gc.get_objects(0)) - 1, gc.get_count()[0]
                    found = census((1,), last, self.young_kinds or Counter())
                    self.young_kinds = found.pop("by_kind_all")
                    found.update(at=time.monotonic(), generation=0, walked=walked, allocated=allocated)
                    self.censuses.append(found)
                    self.write()
            self.at = time.monotonic()
            self.started = time.perf_counter()  # last: the census is not the collector's pause
        elif len(self.collections) < KEPT:
            pause = (time.perf_counter() - self.started) * 1000
            self.collections.append((round(self.at, 4), info["generation"], round(pause, 2), info["collected"]))

    def summary(self) -> dict:
        return {"pid": os.getpid(), "thresholds": gc.get_threshold(), "frozen": gc.get_freeze_count(),
                "collections": self.collections, "by_generation": pauses(self.collections),
                "censuses": self.censuses}

    def write(self) -> None:
        try:
            Path(self.path).write_text(json.dumps(self.summary()))
        except OSError:  # its directory gone (a test's, at exit): nobody is waiting for it
            pass


def pauses(collections: list) -> dict:
    """Per generation: how many, total, p50 and max pause (ms), objects collected."""
    out: dict = {}
    for g in (0, 1, 2):
        ms = sorted(c[2] for c in collections if c[1] == g)
        if ms:
            out[str(g)] = {"n": len(ms), "total_ms": round(sum(ms), 1), "p50_ms": ms[len(ms) // 2],
                           "max_ms": ms[-1], "collected": sum(c[3] for c in collections if c[1] == g)}
    return out


def window(summary: dict, begin: float, end: float) -> dict:
    """:func:`pauses` of the collections that started in ``[begin, end]``
    (``time.monotonic()`` of the bench: the same clock), with the middle and
    full ones' pauses listed."""
    kept = [c for c in summary["collections"] if begin <= c[0] <= end]
    out = pauses(kept)
    out["middle_and_full_ms"] = [c[2] for c in kept if c[1] >= 1]
    return out


def brief(summary: dict, begin: float | None = None, end: float | None = None) -> str:
    """One line of pauses (in the window if given) and, per census, the
    largest kinds and their main holder."""
    p = window(summary, begin, end) if begin is not None else pauses(summary["collections"])
    parts = [f"gen{g}: {f['n']} x, p50 {f['p50_ms']} max {f['max_ms']} ms, total {f['total_ms']} ms, "
             f"collected {f['collected']}" for g, f in p.items() if g in ("0", "1", "2")]
    lines = ["gc pauses: " + ("; ".join(parts) or "none")]
    taken = summary["censuses"]
    if begin is not None:
        taken = [c for c in taken if begin <= c["at"] <= end]
    for c in taken:
        kinds = ", ".join(f"{name} {n:,}" for name, n in list(c["by_kind"].items())[:8])
        lines.append(f"gc census (gen {c['generation']} collection at {c['at']:.1f}, {c['objects']:,} objects in gens "
                     f"{c['generations']}, {c['census_ms']} ms): {kinds}")
        if "grown" in c:
            grown = ", ".join(f"{name} +{n:,}" for name, n in list(c["grown"].items())[:8])
            lines.append(f"    young collection: walks {c.get('walked', 0):,} tracked of {c.get('allocated', 0):,} "
                         f"allocated less freed since the last; gen 1 grew by: {grown or 'nothing'}")
        for name, held in c.get("holders", {}).items():
            main = ", ".join(f"{how} {n}" for how, n in list(held.items())[:3])
            lines.append(f"    {name}: {main}")
    return "\n".join(lines)


def install(path: str, counts: int = 20, holders: int = 1, counts_from: str | None = None,
            young: int = 0, young_skip: int = 2) -> Census:
    """Times every collection from now on (see the module's docstring)."""
    taken = Census(path, counts, holders, counts_from, young, young_skip)
    gc.callbacks.append(taken)
    atexit.register(taken.write)
    threading.Thread(target=_keep_writing, args=(taken,), name="gc-census", daemon=True).start()
    return taken


def _keep_writing(taken: Census) -> None:
    written = -1
    while True:
        time.sleep(WRITE_EVERY_S)
        if len(taken.collections) != written:
            written = len(taken.collections)
            taken.write()


def install_from_env() -> Census | None:
    """:func:`install` if ``MAGNETAR_GC_CENSUS`` is set and this process is a broker."""
    path = os.environ.get("MAGNETAR_GC_CENSUS")
    if not path or not is_broker(list(getattr(sys, "orig_argv", sys.argv))):
        return None
    return install(path, int(os.environ.get("MAGNETAR_GC_CENSUS_COUNTS", "20")),
                   int(os.environ.get("MAGNETAR_GC_CENSUS_HOLDERS", "1")), os.environ.get("MAGNETAR_GC_CENSUS_FROM"),
                   int(os.environ.get("MAGNETAR_GC_CENSUS_YOUNG", "0")),
                   int(os.environ.get("MAGNETAR_GC_CENSUS_YOUNG_SKIP", "2")))

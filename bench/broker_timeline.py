"""A broker's event-loop lag and its object commits' timelines, on the bench's clock.

A bench asks for it (``bench.object_latency --series``); a broker never
imports it. :func:`hook_env` gives the environment that loads it into the
brokers a ``cluster up`` starts (the same ``sitecustomize.py`` as
:mod:`bench.gc_census`, loaded by path, so a peer checkout's broker gets
it too). Once installed:

- **loop lag**: a thread asks the event loop every :data:`PROBE_S` to run
  a callback (``call_soon_threadsafe``) and records how late it ran after
  the time it was *meant* to be asked (a thread kept off the GIL by a
  collection or a long callback asks late; counting from the intended time
  keeps that in). One probe callback per :data:`PROBE_S` is the cost.
- **commits**: the object committer's own per-commit timeline (its
  ``trace`` list, which the broker keeps only when someone sets it) is
  turned on in every ``Committer`` made: class found by name in any
  ``magnetar.storage.object.*`` module as it is imported, so a split of
  that package does not lose it. Per commit: when its oldest batch
  arrived, when it was due, had pipeline room, was taken, its PUT began
  and ended, its transaction began and ended, its receipts ended, and its
  batch count (:data:`COMMIT_FIELDS`; ``time.monotonic()``).
- **ledger events**: when each seal of an object ledger ended (a
  rollover's, a close's) and each compaction of a sealed ledger ended
  (``ObjectBackend.seal`` and ``Compactions._compact`` wrapped, found by
  name as the committer is): ``[kind, t]`` with kind ``seal`` or ``compact``.

Every :data:`FLUSH_S` a writer thread appends one JSON line with what is
new (``{"lags": [[t, ms], ...], "commits": [[...], ...]}``) to
``MAGNETAR_BROKER_TIMELINE`` (``{pid}``: the process id): the file grows
by what happened, never rewritten (a rewrite of a growing record would
hold the GIL longer and longer: the stall it is meant to see).
:func:`read` gives the whole record back. A commit that never ends (a
failed one) is dropped after a minute.
"""
from __future__ import annotations

import asyncio
import importlib.abc
import importlib.machinery
import json
import os
import sys
import threading
import time
import weakref
from pathlib import Path

#: The hook's directory (:mod:`bench.gc_census`'s: its ``sitecustomize.py``
#: loads this file by path; no ``bench`` import here, a peer's ``bench``
#: package may come first on the broker's path).
HOOK_DIR = Path(__file__).resolve().parent / "gc_census_hook"
ENV = "MAGNETAR_BROKER_TIMELINE"
#: Seconds between two loop-lag probes, and between two appends to the file.
PROBE_S, FLUSH_S = 0.02, 0.5
#: A commit's trace stamps, in the order of its written list (then ``batches``).
COMMIT_FIELDS = ("first", "due", "room", "taken", "began", "put_done", "txn_began", "txn_done", "ended")
PACKAGE = "magnetar.storage.object."


def hook_env(path: str) -> dict[str, str]:
    """The environment to add to a ``cluster up``'s (merge with
    :func:`bench.gc_census.hook_env`'s: the same ``PYTHONPATH``)."""
    return {"PYTHONPATH": str(HOOK_DIR), ENV: path}


class Timeline:
    """The records kept until the next flush, and the committers traced."""

    def __init__(self, path: str) -> None:
        self.path = path.replace("{pid}", str(os.getpid()))
        self.lags: list[tuple[float, float]] = []
        self.committers: list[weakref.ref] = []
        self.unended: list[dict] = []
        self.events: list[tuple[str, float]] = []  # appended on the loop, swapped out by the flush
        self.lock = threading.Lock()

    def trace(self, committer) -> None:
        committer.trace = []
        self.committers.append(weakref.ref(committer))

    def ended_commits(self) -> list[list]:
        """The commits that ended since the last call, as lists of stamps."""
        fresh = []
        for ref in self.committers:
            committer = ref()
            if committer is not None and committer.trace:
                fresh += committer.trace
                committer.trace = []  # one attribute store: the loop appends to the new list from now on
        waiting = self.unended + fresh
        done = [[round(s[f], 5) for f in COMMIT_FIELDS] + [s.get("batches", 0)] for s in waiting if "ended" in s]
        cutoff = time.monotonic() - 60
        self.unended = [s for s in waiting if "ended" not in s and s["first"] > cutoff]
        return done

    def flush(self) -> None:
        with self.lock:
            lags, self.lags = self.lags, []
        commits = self.ended_commits()
        events, self.events = self.events, []  # one attribute store: the loop appends to the new list
        if not (lags or commits or events):
            return
        line = json.dumps({"lags": [[round(t, 4), round(ms, 2)] for t, ms in lags], "commits": commits,
                           "events": [[kind, round(t, 4)] for kind, t in events]})
        try:
            with open(self.path, "a") as out:
                out.write(line + "\n")
        except OSError:  # its directory gone (a test's, at exit): nobody reads it any more
            pass

    def probe(self, loop) -> None:
        """Asks ``loop`` every :data:`PROBE_S` (see the module's docstring)."""
        def ran(meant: float) -> None:
            now = time.monotonic()
            with self.lock:
                self.lags.append((meant, (now - meant) * 1000))

        meant = time.monotonic()
        while True:
            meant += PROBE_S
            delay = meant - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            try:
                loop.call_soon_threadsafe(ran, meant)
            except RuntimeError:  # the loop closed: the broker is stopping
                return
            if delay < -PROBE_S:  # a stall: the next probe from now, not a burst of missed ones
                meant = time.monotonic()


class _TraceCommitters(importlib.abc.MetaPathFinder):
    """Wraps the loading of ``magnetar.storage.object.*`` modules: a
    ``Committer`` class defined there gets its instances traced."""

    def __init__(self, timeline: Timeline) -> None:
        self.timeline = timeline

    def find_spec(self, name, path, target=None):
        if not name.startswith(PACKAGE):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        real, timeline = spec.loader.exec_module, self.timeline

        def exec_module(module) -> None:
            real(module)
            cls = getattr(module, "Committer", None)
            if isinstance(cls, type) and cls.__module__ == module.__name__:
                made = cls.__init__

                def __init__(self, *args, **kwargs) -> None:
                    made(self, *args, **kwargs)
                    timeline.trace(self)
                cls.__init__ = __init__
            for name, method, kind in _NOTED:
                owner = getattr(module, name, None)
                if isinstance(owner, type) and owner.__module__ == module.__name__ and hasattr(owner, method):
                    setattr(owner, method, _noting(getattr(owner, method), kind, timeline))
        spec.loader.exec_module = exec_module
        return spec


#: The methods noted when they end: (class, method, kind). A compaction is
#: run by the object backend's Compactions (storage/object/compactions.py).
_NOTED = (("ObjectBackend", "seal", "seal"), ("Compactions", "_compact", "compact"))


def _noting(method, kind: str, timeline: Timeline):
    """``method`` (a coroutine function) that notes ``[kind, when it ended]``."""
    async def noted(*args, **kwargs):
        try:
            return await method(*args, **kwargs)
        finally:
            timeline.events.append((kind, time.monotonic()))
    return noted


def install(path: str) -> Timeline:
    """Traces committers made from now on and probes the first event loop
    made (``asyncio.new_event_loop``, which ``asyncio.run`` calls)."""
    timeline = Timeline(path)
    sys.meta_path.insert(0, _TraceCommitters(timeline))
    make = asyncio.events.new_event_loop
    probing: list = []

    def new_event_loop():
        loop = make()
        if not probing:
            probing.append(loop)
            threading.Thread(target=timeline.probe, args=(loop,), name="loop-lag", daemon=True).start()
        return loop
    asyncio.events.new_event_loop = new_event_loop
    threading.Thread(target=_keep_flushing, args=(timeline,), name="timeline", daemon=True).start()
    return timeline


def _keep_flushing(timeline: Timeline) -> None:
    while True:
        time.sleep(FLUSH_S)
        timeline.flush()


def install_from_env(is_broker) -> Timeline | None:
    """:func:`install` if :data:`ENV` is set and ``is_broker()``."""
    path = os.environ.get(ENV)
    return install(path) if path and is_broker() else None


def read(path: str) -> dict:
    """The whole record: ``{"lags": [(t, ms)], "commits": [dict per commit],
    "events": [(kind, t)]}``
    (empty lists if the file is missing)."""
    lags: list = []
    commits: list = []
    events: list = []
    try:
        text = Path(path).read_text()
    except OSError:
        return {"lags": lags, "commits": commits, "events": events}
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:  # a line cut by a kill
            continue
        lags += [tuple(x) for x in record["lags"]]
        commits += [dict(zip((*COMMIT_FIELDS, "batches"), c)) for c in record["commits"]]
        events += [tuple(e) for e in record.get("events", ())]
    return {"lags": lags, "commits": commits, "events": events}

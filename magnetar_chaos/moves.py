"""Bundle moves and splits as faults, through the admin REST API of a cluster.

- ``move``: the bundle holding one of the workloads' topics is unloaded with
  a destination broker (``PUT .../{bundle}/unload?destinationBroker=``), as an
  operator or the load manager would: its owner hands it over without
  client lookups (PIP-307), producers and consumers follow to the new owner.
- ``move-kill``: a move whose destination is killed (SIGKILL) as the
  handover runs or just after, then restarted: the bundle is left
  releasing to, or just owned by, a dead broker; its session lapses,
  another broker takes it.
- ``move-kill-source``: a move whose *source* (the bundle's owner) is
  killed (SIGKILL) as the handover runs or just after, then restarted: the
  bundle is left Releasing from, or Assigning from, a dead broker, with its
  topics released or half released and their ledgers open. The new owner
  must get it (the leader passes it on once the source's session lapses;
  a source back within its session passes it on itself), fence and recover
  the ledgers the source left open. :func:`wait_owned` measures how long
  the bundle had no owner.
- ``split-kill``: a split whose owner is killed (SIGKILL) as it runs or
  just after, then restarted: the bundle, or its halves, must be owned
  again (:func:`wait_topic_owned`).
- ``split``: the same bundle is cut in two (``PUT .../{bundle}/split``, by
  topic count, or in the middle of its range when it holds one topic); its
  owner keeps both halves and their clients.

Either may be refused: the bundle is not owned just now (the aftermath of an
earlier fault: a session lapsed, the bundle is between owners), the chosen
destination is not live yet, a range too small to cut. That is the cluster
answering correctly, not a failed run: :func:`move_bundle` and
:func:`split_bundle` return what happened as text, the refusal included. They
raise only :class:`NoBrokerAnswers` when no broker's admin API answered at all.
"""
from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
import urllib.error
import urllib.parse
import urllib.request

#: One admin request's limit: an unload waits for the new owner (30 s at most on the broker side).
REQUEST_TIMEOUT_S = 40.0


class NoBrokerAnswers(RuntimeError):
    pass


def _request(admin_url: str, path: str, method: str = "GET") -> object:
    req = urllib.request.Request(admin_url + path, method=method, data=b"" if method == "PUT" else None)
    with urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT_S) as resp:
        raw = resp.read()
    return json.loads(raw) if raw else None


def _first_answer(admin_urls: list[str], path: str) -> tuple[str, object]:
    """``(admin URL, answer)`` of the first broker that answers a GET; a
    broker just restarted or out of its session may not."""
    last: Exception | None = None
    for url in admin_urls:
        try:
            return url, _request(url, path)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            last = exc
    raise NoBrokerAnswers(f"no broker answered GET {path}: {last}")


def _bundle_and_owner(admin_urls: list[str], topic: str) -> tuple[str, str, str | None]:
    """(admin URL that answered, bundle range, owner broker id or None) of ``topic``."""
    domain, rest = topic.split("://", 1)
    tenant, namespace, local = rest.split("/", 2)
    url, answer = _first_answer(admin_urls, f"/lookup/v2/topic/{domain}/{tenant}/{namespace}/"
                                            f"{urllib.parse.quote(local)}/bundle")
    bundle = answer["bundle"] if isinstance(answer, dict) else str(answer)
    _, bundles = _first_answer([url] + [u for u in admin_urls if u != url],
                               f"/admin/v2/namespaces/{tenant}/{namespace}/bundles")
    return url, bundle, bundles.get("owners", {}).get(bundle)


def _refusal(exc: urllib.error.HTTPError) -> str:
    try:
        reason = json.loads(exc.read() or b"{}").get("reason", "")
    except ValueError:
        reason = ""
    return f"refused ({exc.code}: {reason or exc.reason})"


@dataclass(frozen=True)
class Move:
    """A move about to be asked: ``topic``'s ``bundle``, from ``owner`` to
    ``destination`` (broker ids), through the admin API at ``asked``."""
    asked: str
    topic: str
    bundle: str
    owner: str | None
    destination: str


def plan_move(admin_urls: list[str], topic: str, rng: random.Random) -> Move:
    """Where ``topic``'s bundle is and where it goes: another broker drawn
    from ``rng``. ``admin_urls[k]`` is broker k's admin URL, whose
    ``host:port`` is its broker id. Raises NoBrokerAnswers."""
    ids = [u.removeprefix("http://") for u in admin_urls]
    asked, bundle, owner = _bundle_and_owner(admin_urls, topic)
    destination = rng.choice([b for b in ids if b != owner])
    if asked.removeprefix("http://") == destination:
        # Asked elsewhere: the destination may be killed while the move runs
        # (move-kill), and the question is whether the cluster gets over it.
        asked = next(u for u in admin_urls if u.removeprefix("http://") != destination)
    return Move(asked, topic, bundle, owner, destination)


def wait_owned(admin_urls: list[str], topic: str, bundle: str, timeout: float) -> tuple[float, str | None]:
    """Poll until ``bundle`` of ``topic``'s namespace is Owned (any broker's
    view: the first that answers); ``(seconds waited, owner id)``, or
    ``(timeout, None)`` if it was still not owned then (a stuck bundle).
    A bundle cut by a split meanwhile is gone from the list: that counts as
    settled (its halves are owned by whoever split it)."""
    start = time.monotonic()
    path = f"/admin/v2/namespaces/{_namespace(topic)}/bundles"
    while True:
        waited = time.monotonic() - start
        try:
            _, answer = _first_answer(admin_urls, path)
            states = answer.get("states", {}) if isinstance(answer, dict) else {}
            if bundle not in states:
                return waited, None
            if states[bundle] == "Owned":
                return waited, answer.get("owners", {}).get(bundle)
        except NoBrokerAnswers:
            pass  # the brokers are restarting or out of their sessions: ask again
        if waited >= timeout:
            return timeout, None
        time.sleep(0.1)


def do_move(move: Move, ids: list[str]) -> tuple[str, bool]:
    """Ask for ``move``; ``(description, whether the new owner took it)``.
    Returns once the destination owns the bundle, or the cluster refused
    (``ids``: the brokers' ids, to name them broker-k)."""
    what = f"move {move.bundle} {_name(ids, move.owner)} -> {_name(ids, move.destination)}"
    try:
        _request(move.asked, f"/admin/v2/namespaces/{_namespace(move.topic)}/{move.bundle}/unload?"
                             f"destinationBroker={urllib.parse.quote(move.destination)}", "PUT")
    except urllib.error.HTTPError as exc:
        return f"{what}: {_refusal(exc)}", False
    except (urllib.error.URLError, OSError) as exc:
        return f"{what}: no answer ({exc})", False
    return what, True


def move_bundle(admin_urls: list[str], topic: str, rng: random.Random) -> tuple[str, str | None]:
    """Move ``topic``'s bundle to another broker drawn from ``rng`` (see
    :func:`plan_move`). Returns ``(description, destination broker id, or
    None when the move did not happen)``; raises NoBrokerAnswers."""
    move = plan_move(admin_urls, topic, rng)
    what, done = do_move(move, [u.removeprefix("http://") for u in admin_urls])
    return what, move.destination if done else None


def wait_topic_owned(admin_urls: list[str], topic: str, timeout: float) -> tuple[float, str | None]:
    """Poll until the bundle that holds ``topic`` now (a split may have cut
    the one it was in) is Owned; ``(seconds waited, owner id)``, or
    ``(timeout, None)`` if it was not by then."""
    start = time.monotonic()
    path = f"/admin/v2/namespaces/{_namespace(topic)}/bundles"
    while True:
        waited = time.monotonic() - start
        try:
            _, bundle, _ = _bundle_and_owner(admin_urls, topic)
            _, answer = _first_answer(admin_urls, path)
            if isinstance(answer, dict) and answer.get("states", {}).get(bundle) == "Owned":
                return waited, answer.get("owners", {}).get(bundle)
        except (NoBrokerAnswers, KeyError, TypeError):
            pass  # restarting, out of session, or mid-split: ask again
        if waited >= timeout:
            return timeout, None
        time.sleep(0.1)


def plan_split(admin_urls: list[str], topic: str) -> tuple[str, str, str | None]:
    """``(admin URL to ask, bundle, owner id or None)`` for a split of ``topic``'s bundle."""
    return _bundle_and_owner(admin_urls, topic)


def split_bundle(admin_urls: list[str], topic: str, planned: tuple[str, str, str | None] | None = None) -> str:
    """Split ``topic``'s bundle (as ``planned`` by :func:`plan_split`, else
    found now); a description of what happened (see the module docstring)."""
    asked, bundle, owner = planned or _bundle_and_owner(admin_urls, topic)
    what = f"split {bundle} on {_name([u.removeprefix('http://') for u in admin_urls], owner)}"
    for algorithm in ("topic_count_equally_divide", "range_equally_divide"):
        try:
            _request(asked, f"/admin/v2/namespaces/{_namespace(topic)}/{bundle}/split?"
                            f"splitAlgorithmName={algorithm}", "PUT")
            return f"{what} ({algorithm})"
        except urllib.error.HTTPError as exc:
            # One topic in the bundle: no cut by topic count, try the middle of the range.
            refusal = _refusal(exc)
            if exc.code != 412:
                break
        except (urllib.error.URLError, OSError) as exc:
            return f"{what}: no answer ({exc})"
    return f"{what}: {refusal}"


def _namespace(topic: str) -> str:
    return "/".join(topic.split("://", 1)[1].split("/")[:2])


def _name(ids: list[str], broker: str | None) -> str:
    return f"broker-{ids.index(broker)}" if broker in ids else str(broker)

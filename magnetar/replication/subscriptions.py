"""Replicated subscriptions (PIP-33): a subscription that follows its consumer
to another cluster.

Positions differ between clusters, so each topic with a replicated
subscription takes *snapshots* that tie positions together, and a
subscription announces the newest snapshot its mark-delete position passed:

1. Every ``snapshot_interval`` (1 s), if messages arrived since the last
   snapshot and every remote's replicator is connected, this cluster writes a
   SNAPSHOT_REQUEST marker; the replicators carry it to every remote.
2. A cluster that stores a request from X writes a SNAPSHOT_RESPONSE marker
   naming the request's position in its own topic, for X only.
3. When every remote answered (a second round when there are more than two
   clusters, so that what the remotes sent each other is covered), X writes a
   SNAPSHOT marker, kept local: the remotes' positions of the first round,
   and as its own position that of the last response of the last round.
4. A replicated subscription whose dispatcher read a snapshot and whose
   mark-delete position then passes it writes an UPDATE marker (its name and
   the remotes' positions); each remote moves its copy of the subscription
   there (creating it if needed), never backwards.

A snapshot is only taken while every cluster answers: with one down, none
completes (those in progress are abandoned after ``snapshot_timeout``), so a
consumer never skips messages a region has not seen.

Failure modes: markers written while the topic closes fail quietly (the next
round starts over on the new owner); a marker that cannot be parsed is logged
and ignored.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from magnetar.broker.entries.markers import marker_metadata
from magnetar.protocol import pb
from magnetar.storage import Position

if TYPE_CHECKING:
    from magnetar.broker.topics.topic import Topic

log = logging.getLogger(__name__)

#: Pulsar's defaults: replicatedSubscriptionsSnapshotFrequencyMillis,
#: replicatedSubscriptionsSnapshotTimeoutSeconds.
SNAPSHOT_INTERVAL_S = 1.0
SNAPSHOT_TIMEOUT_S = 30.0


def _mid(pos: Position) -> pb.MarkersMessageIdData:
    return pb.MarkersMessageIdData(ledger_id=pos.ledger_id, entry_id=pos.entry_id)


@dataclass
class _Pending:
    """A snapshot this cluster asked for and is collecting answers to."""

    snapshot_id: str
    started: float
    remotes: frozenset[str]
    rounds: int
    round: int = 1
    first: dict[str, pb.MarkersMessageIdData] = field(default_factory=dict)
    answered: set[str] = field(default_factory=set)


class ReplicatedSubscriptions:
    """One topic's PIP-33 controller; the topic's ``marker_handler``.

    ``remotes()`` names the clusters the topic replicates to now;
    ``connected(remote)`` says whether that replicator reaches its remote.
    """

    def __init__(self, topic: "Topic", local: str, remotes: Callable[[], set[str]],
                 connected: Callable[[str], bool], interval: float = SNAPSHOT_INTERVAL_S,
                 timeout: float = SNAPSHOT_TIMEOUT_S) -> None:
        self.topic = topic
        self.local = local
        self._remotes = remotes
        self._connected = connected
        self.interval = interval
        self.timeout = timeout
        self._pending: dict[str, _Pending] = {}
        self._data_in_at_last = -1
        self._task: asyncio.Task | None = None
        self.snapshots_completed = 0
        self.updates_sent = 0
        self.updates_applied = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"snapshots {self.topic.name}")

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    # -- taking snapshots ----------------------------------------------------------------
    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.interval)
            now = loop.time()
            for sid in [s for s, p in self._pending.items() if now - p.started > self.timeout]:
                log.info("%s: snapshot %s abandoned (not every cluster answered)", self.topic.name, sid)
                del self._pending[sid]
            try:
                self._maybe_start(now)
            except Exception as exc:  # the topic is closing; the next owner starts over
                log.debug("%s: cannot start a snapshot: %s", self.topic.name, exc)

    def _maybe_start(self, now: float) -> None:
        topic = self.topic
        if not any(sub.replicated for sub in list(topic.subscriptions.values())):
            return
        if topic.data_msg_in == self._data_in_at_last or self._pending:
            return  # nothing new since the last one, or one still in progress
        remotes = frozenset(self._remotes())
        if not remotes or not all(self._connected(r) for r in remotes):
            return  # a snapshot needs every cluster's answer
        self._data_in_at_last = topic.data_msg_in
        pending = _Pending(str(uuid.uuid4()), now, remotes, rounds=2 if len(remotes) > 1 else 1)
        self._pending[pending.snapshot_id] = pending
        self._request(pending)

    def _request(self, pending: _Pending) -> None:
        body = pb.ReplicatedSubscriptionsSnapshotRequest(snapshot_id=pending.snapshot_id, source_cluster=self.local)
        self._write(pb.REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST, body, sorted(pending.remotes))

    def _write(self, marker_type: int, body, replicate_to: list[str]) -> asyncio.Future:
        return self.topic.append_marker(marker_metadata(marker_type, replicate_to), body.SerializeToString())

    # -- markers from other clusters -----------------------------------------------------
    def on_replicated_marker(self, position: Position, metadata: pb.MessageMetadata, payload: bytes) -> None:
        try:
            kind = metadata.marker_type
            if kind == pb.REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST:
                self._answer(position, pb.ReplicatedSubscriptionsSnapshotRequest.FromString(payload))
            elif kind == pb.REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE:
                self._collect(position, pb.ReplicatedSubscriptionsSnapshotResponse.FromString(payload))
            elif kind == pb.REPLICATED_SUBSCRIPTION_UPDATE:
                update = pb.ReplicatedSubscriptionsUpdate.FromString(payload)
                asyncio.get_running_loop().create_task(self._apply(update))
        except Exception as exc:
            log.warning("%s: marker at %s ignored: %s", self.topic.name, position, exc)

    def _answer(self, position: Position, request: pb.ReplicatedSubscriptionsSnapshotRequest) -> None:
        if not request.source_cluster or request.source_cluster == self.local:
            return
        body = pb.ReplicatedSubscriptionsSnapshotResponse(
            snapshot_id=request.snapshot_id,
            cluster=pb.ClusterMessageId(cluster=self.local, message_id=_mid(position)))
        self._write(pb.REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE, body, [request.source_cluster])

    def _collect(self, position: Position, response: pb.ReplicatedSubscriptionsSnapshotResponse) -> None:
        pending = self._pending.get(response.snapshot_id)
        cluster = response.cluster.cluster
        if pending is None or cluster not in pending.remotes or cluster in pending.answered:
            return
        pending.answered.add(cluster)
        if pending.round == 1:
            pending.first[cluster] = response.cluster.message_id
        if pending.answered != pending.remotes:
            return
        if pending.round < pending.rounds:
            pending.round += 1
            pending.answered = set()
            self._request(pending)
            return
        del self._pending[pending.snapshot_id]
        snapshot = pb.ReplicatedSubscriptionsSnapshot(snapshot_id=pending.snapshot_id, local_message_id=_mid(position))
        for remote in sorted(pending.first):
            snapshot.clusters.add(cluster=remote, message_id=pending.first[remote])
        self._write(pb.REPLICATED_SUBSCRIPTION_SNAPSHOT, snapshot, [self.local])
        self.snapshots_completed += 1

    # -- subscriptions -------------------------------------------------------------------
    def subscription_moved(self, name: str, snapshot: pb.ReplicatedSubscriptionsSnapshot) -> None:
        remotes = self._remotes()
        update = pb.ReplicatedSubscriptionsUpdate(subscription_name=name)
        for cluster in snapshot.clusters:
            if cluster.cluster in remotes:
                update.clusters.add().CopyFrom(cluster)
        if not update.clusters:
            return
        try:
            self._write(pb.REPLICATED_SUBSCRIPTION_UPDATE, update, sorted(c.cluster for c in update.clusters))
            self.updates_sent += 1
        except Exception as exc:  # closing: the subscription announces its next snapshot on the new owner
            log.debug("%s: update of %s not written: %s", self.topic.name, name, exc)

    async def _apply(self, update: pb.ReplicatedSubscriptionsUpdate) -> None:
        """Move (or create) this cluster's copy of the subscription to its
        position in the update; never backwards."""
        mine = next((c for c in update.clusters if c.cluster == self.local), None)
        if mine is None:
            return
        position = Position(mine.message_id.ledger_id, mine.message_id.entry_id)
        try:
            sub = await self.topic.replicated_subscription(update.subscription_name)
            if position > sub.cursor.mark_delete_position:
                await sub.acknowledge_cumulative(position)
                self.updates_applied += 1
        except Exception as exc:
            log.warning("%s: cannot move subscription %s to %s: %s", self.topic.name,
                        update.subscription_name, position, exc)

    def stats(self) -> dict:
        return {"snapshotsCompleted": self.snapshots_completed, "updatesSent": self.updates_sent,
                "updatesApplied": self.updates_applied, "snapshotsInProgress": len(self._pending)}

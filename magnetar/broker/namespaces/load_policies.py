"""The policies of topics being loaded, read a namespace at a time (issue 41).

A broker that restarts, takes a bundle over or fails over loads thousands of
topics at once, and each load applies the policies in force for its topic
(:mod:`.applied`): read alone, two reads each (its namespace's document and
its own), 20,000 reads from etcd for 10,000 topics, in a burst beside the
loads' other reads and the object committer's transactions. Here the loads
of one namespace are gathered: while a read of a namespace is under way, the
loads of that namespace that ask meanwhile wait, and the next read answers
them all at once, right after (its record once, and the topics' documents as
:func:`.applied.applied_by_namespace` reads them: one read each for a few
topics, range reads for more). A lone load costs what it did (two reads); a
burst costs a few reads per namespace and round trip.

**Contract.** The read that answers a load starts after the load asked
(never one already under way): it sees every change committed before the
load asked, as a read of its own would. A change after the read is the
caller's to apply (the service's watch on the policy roots refreshes loaded
topics; a topic still loading when the change is noted is refreshed once it
is loaded: ``BrokerService._load``).

**Failure.** A failed read fails every load it answers (each raises what the
store raised; their clients look up again); the next read is a fresh one.
"""
from __future__ import annotations

import asyncio

from magnetar.metadata.store import MetadataStore

from magnetar.broker.topic_name import TopicName

from .applied import read_namespace


class LoadPolicies:
    """Reads the policies in force for topics being loaded, gathering the
    loads of one namespace that ask while its previous read is under way."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        #: Loads waiting for the next read of their namespace: (topic, its answer).
        self._waiting: dict[str, list[tuple[TopicName, asyncio.Future]]] = {}
        #: A task reading each namespace with loads waiting (kept: not garbage-collected mid-read).
        self._readers: dict[str, asyncio.Task] = {}

    async def policies(self, name: TopicName) -> dict:
        """The policies in force for ``name`` (as :func:`.applied.applied_policies`
        gives them), read after this call began. Raises what the store raised."""
        namespace = name.namespace_name
        answer = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(namespace, []).append((name, answer))
        if namespace not in self._readers:
            self._readers[namespace] = asyncio.get_running_loop().create_task(
                self._read(namespace), name=f"load policies {namespace}")
        return await answer

    async def _read(self, namespace: str) -> None:
        """Answer the loads of ``namespace`` that wait, a read at a time, until none does."""
        batch: list[tuple[TopicName, asyncio.Future]] = []
        try:
            while batch := self._waiting.pop(namespace, []):
                names = [name for name, answer in batch if not answer.done()]  # a cancelled load is not read
                if not names:
                    continue
                try:
                    found = await read_namespace(self.store, namespace, names)
                except Exception as exc:  # every load of this read fails alike
                    for _, answer in batch:
                        if not answer.done():
                            answer.set_exception(exc)
                    continue
                for name, answer in batch:
                    if not answer.done():
                        answer.set_result(found[name])
        except BaseException:  # cancelled (the loop closing): no load waits forever
            for _, answer in batch + self._waiting.pop(namespace, []):
                answer.cancel()
            raise
        finally:
            self._readers.pop(namespace, None)


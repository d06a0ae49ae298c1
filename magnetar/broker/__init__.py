"""The broker: topics, subscriptions and the server around them.

Rooms, from the bottom up; a room imports only the rooms below it (checked by
``tests/unit/test_house.py``):

- the vocabulary, at this level: ``errors`` (Pulsar's error codes as
  exceptions), ``topic_name``, ``config``;
- ``namespaces/``: tenants, namespaces and their policies in the metadata store;
- ``entries/``: the stored entry's format;
- ``subscriptions/``: cursors, consumers, dispatchers;
- ``policies/``: backlog quotas and message expiry acting on topics;
- ``topics/``: the topic and its append path (producers, dedup, schemas,
  compaction);
- ``server/``: the service, the connection shell and its command handlers.

Where a lower room must reach an object of a higher one (a subscription its
topic, a quota its topic's producers, a topic its service), it names what it
needs with a small ``typing.Protocol`` (``views`` modules, ``TopicHost``)
instead of importing the room above.
"""

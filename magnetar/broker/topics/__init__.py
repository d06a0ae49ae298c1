"""The topic and its single ordered append path.

Owns: ``topic`` (producers' admission, the access modes and topic epoch,
publish, subscriptions' creation, terminate, stats), ``producer`` (a
producer and the in-order delivery of its receipts), ``dedup`` (idempotent
producers and deduplication: pids, generations, sequences, snapshots),
``schemas`` (the schema registry) and ``compaction`` (compacted views).
May import: ``policies``, ``subscriptions``, ``entries``, ``namespaces``, the
vocabulary, ``magnetar.storage``/``metadata``/``protocol``. What a topic needs
of the service that loads it is ``topic.TopicHost``: it never imports ``server``.
"""

"""Tenants, namespaces, partitioned-topic metadata and namespace policies, as
records in the metadata store.

Owns: ``resources`` (create/read/update/delete of those records, with their
validation errors), ``policies`` (the policy values a topic obeys: retention,
backlog quotas, TTL, deduplication), ``creation`` (whether a topic that is
not stored yet may be created on a client's request).
May import: the broker's vocabulary (``errors``, ``topic_name``, ``config``),
``magnetar.metadata``, ``magnetar.storage`` (retention values). Nothing above.
"""

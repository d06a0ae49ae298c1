"""Tenants, namespaces, partitioned-topic metadata and namespace policies, as
records in the metadata store.

Owns: ``resources`` (create/read/update/delete of those records, with their
validation errors), ``policies`` (the policy values a topic obeys: retention,
backlog quotas, TTL, deduplication), ``creation`` (whether a topic that is
not stored yet may be created on a client's request), ``applied`` (a topic's
own policies over its namespace's, for one topic or a namespace's many),
``load_policies`` (those of topics being loaded, a namespace's loads that
come at once read together) and ``policy_keys`` (those records read by
range; whose policies a changed key concerns).
May import: the broker's vocabulary (``errors``, ``topic_name``, ``config``),
``magnetar.metadata``, ``magnetar.storage`` (retention values). Nothing above.
"""

"""Enforcing a namespace's policies on loaded topics: backlog quotas (hold,
refuse, evict) and message expiry (TTL).

Owns: ``backlog_quota`` (measuring a topic's backlog and applying the quota's
policy; called on the topic's admission path and by a periodic round),
``expiry`` (the TTL round) and ``views`` (what this room uses of a topic and
of the service, as protocols).
May import: ``subscriptions``, ``entries``, ``namespaces``, the vocabulary,
``magnetar.storage``/``metadata``. The topic calls into this room; this room
acts on the topic through ``views.PolicedTopic`` and never imports ``topics``.
"""

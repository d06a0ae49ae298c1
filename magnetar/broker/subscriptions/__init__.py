"""Subscriptions: a named cursor on a topic, its consumers, and the dispatcher
that hands entries to them.

Owns: ``subscription``, ``consumer``, ``dispatcher`` (Exclusive/Failover and
Shared), ``key_shared``, ``delayed`` (delivery at a time), ``cursor_ops``
(moving a cursor on an operator's behalf) and ``views`` (the protocols that
name what this room uses of a topic and of a subscription).
May import: ``entries``, ``namespaces``, the broker's vocabulary,
``magnetar.storage`` and ``magnetar.protocol``. A subscription reaches its
topic only through ``views.TopicView``; it never imports ``topics``.
"""

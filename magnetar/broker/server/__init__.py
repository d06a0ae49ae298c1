"""The broker process: the service that loads topics, the connection shell and
its command handlers, and the admin-side lifecycle of topics.

Owns: ``service`` (``BrokerService``: topics loaded on demand, unloaded when
storage fails), ``server`` (``Broker``: start-up and shut-down of the listener,
the metadata store, the managed ledger factory and periodic tasks),
``connection`` (the asyncio shell around ``magnetar.protocol.Connection``),
``handlers/`` (command handlers by area), ``lifecycle`` (creating and deleting
topics and namespaces) and ``topic_list`` (GET_TOPICS_OF_NAMESPACE filtering).
May import every room of ``broker/``; only ``magnetar.admin`` and the CLI
import it.
"""

"""Security: TLS contexts, authentication providers, per-connection
authentication state, and Pulsar's authorization model.

Nothing here does I/O on sockets. The broker's connection shell and the admin
API drive these pieces (see docs/security.md and docs/ARCHITECTURE.md).
Layering: ``magnetar.security`` depends on nothing else in Magnetar; the
broker and the admin API depend on it.
"""

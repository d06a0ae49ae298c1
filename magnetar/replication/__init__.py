"""Geo-replication: copying topics between clusters (regions).

Regions share a configuration store (clusters, tenants, namespace policies);
each keeps its own metadata store and storage. For every loaded topic whose
namespace lists the local cluster and others in ``replication_clusters``,
this broker runs one :class:`.replicator.Replicator` per remote cluster: a
durable cursor ``pulsar.repl.<remote>`` on the topic's managed ledger and a
producer ``pulsar.repl.<local>`` on the remote topic.

- :mod:`.remote`: clients for the remote clusters, found in the configuration store;
- :mod:`.replicator`: one topic to one remote cluster (read, stamp, send, mark-delete);
- :mod:`.manager`: the broker extension that starts and stops replicators as
  topics load and policies change.

Guarantees: an entry reaches each remote once. It is marked ``replicated_from``
and never forwarded again; the remote deduplicates the replicator's producer
by the entry's source position, so a restart of either side (the cursor
re-reads what it had not marked) stores nothing twice. A remote that is down
makes the cursor wait; it catches up when the remote returns, and the cursor
holds the entries back from trimming until then.
"""

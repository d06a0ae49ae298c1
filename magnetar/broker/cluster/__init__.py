"""Many brokers serving one cluster: bundles, their owners, lookups.

Owns: ``bundles`` (a namespace cut into hash ranges of topic names),
``channel`` (the bundle state channel in the metadata store: Pulsar's states,
legal transitions, compare-and-set writes, a local table kept by a watch),
``registry`` (live brokers: ephemeral records with their URLs and load),
``placement`` (choosing the least loaded broker), ``leader`` (the elected
broker that reassigns a dead broker's bundles) and ``member`` (this broker's
part: answering lookups, taking bundles assigned to it, giving up bundles it
lost).
May import: ``topics`` and the rooms below, ``magnetar.metadata``. It never
imports ``server``; the service hands it callbacks (unload a bundle's topics).
"""

"""Child servers the project runs for tests and local clusters (etcd,
SeaweedFS): starting one with its output in a log file, waiting until it
serves, stopping, killing, pausing and resuming it (:mod:`.child`), and
picking free loopback ports for it. The lowest layer: imports nothing of
the project's."""

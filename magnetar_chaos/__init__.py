"""Fault injection on Magnetar itself, Jepsen-style: real clients work while
a nemesis kills and pauses real broker processes, every operation goes into
a history, and a checker judges the history.

- :mod:`.history`   the history: one JSON object per line (invoke/ok/fail/info);
- :mod:`.checker`   what must hold: nothing acknowledged lost, no duplicates
  where deduplication or idempotence promised none, each producer's order,
  one exclusive writer at a time, conditional offsets honoured;
- :mod:`.broker`    a broker process under test and the signals done to it;
- :mod:`.systems`   standalone or cluster (with etcd), and the faults each takes;
- :mod:`.netns`     the cluster's brokers in network namespaces, and the partitions between them;
- :mod:`.hosts_system` the ``hosts`` topology: docs/deploy.md's deployment on a test bed of hosts,
  the workloads on its client host (:mod:`.thread_netns`), the faults between hosts (:mod:`.host_faults`);
- :mod:`.moves`     bundle moves and splits through the admin API, as faults;
- :mod:`.workloads` the clients (official and Magnetar's) and what they record;
- :mod:`.runner`    a run: broker, workloads, nemesis schedule from a seed, final reads;
- :mod:`.cli`       ``magnetar-chaos run`` / ``check`` / ``fuzz`` (also ``magnetar-chaos``).

A developer tool beside the product, not part of it: the ``magnetar``
distribution does not ship it; ``tools/pyproject.toml`` installs it with the
test set-up, and ``magnetar-chaos`` imports it only when invoked.
"""

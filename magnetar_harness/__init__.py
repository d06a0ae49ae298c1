"""The one way the project starts its own processes for tests, bench/ and
the chaos tool: real brokers, clusters, regions and etcd, on free ports,
each waited for until it says it is ready.

- :mod:`.broker`   one broker process (standalone or a cluster member): start,
  stop (SIGTERM), kill (SIGKILL), pause/resume (SIGSTOP/SIGCONT), restart;
- :mod:`.secured`  brokers that want tokens or client certificates;
- :mod:`.pki`      a CA and certificates for them;
- :mod:`.cluster`  ``magnetar cluster up`` as a child process (N brokers, etcd);
- :mod:`.regions`  ``magnetar geo up`` as a child process (N one-broker regions);
- :mod:`.etcd`     an etcd server of its own;
- :mod:`.objectstore` a SeaweedFS S3 endpoint of its own;
- :mod:`.ports`    free ports and blocks of them;
- :mod:`.waiting`  waiting on a condition with a deadline;
- :mod:`.lifetime` processes that die with the one that started them (pdeathsig).

A new kind of process is a module of its own here
with the same life: ``start()`` returns once it is ready or raises saying
why, with the tail of its log; ``stop()`` ends it and everything it started.

A developer tool beside the product (tools/pyproject.toml): the product's
install does not ship it, and nothing in ``magnetar/`` imports it.
"""

# Quick start: `make standalone` runs a broker, `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# What each target needs, installed once per pyproject.toml change: the broker
# alone (small, fast), a local cluster (+ the etcd and SeaweedFS servers), the
# test suite (+ the official client, Spark, etcd, SeaweedFS).
RUNTIME_STAMP := $(VENV)/.installed-runtime
CLUSTER_STAMP := $(VENV)/.installed-cluster
STAMP := $(VENV)/.installed
PORT ?= 6650
ADMIN_PORT ?= 8080
DATA ?= ./data

.PHONY: hosts-up hosts-down chaos-hosts chaos-soak-hosts console-test install standalone cluster test unit integration chaos chaos-interval chaos-partition chaos-soak chaos-soak-object proto proto-check spark-compat bench bench-quick profile clean

install: $(STAMP)

$(VENV)/bin/pip:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# setup.py and the C sources: the compiled hot paths are rebuilt when their sources change.
HOT := setup.py $(wildcard magnetar/protocol/_hot*.c magnetar/protocol/_hot*.h) magnetar/storage/file/_round.c magnetar/protocol/_crc32c.h $(wildcard pyspark_magnetar/_columns*.c pyspark_magnetar/_columns*.h)

# Editable installs in compat mode: the checkout goes on sys.path through a .pth
# file, so Spark's scan for `pyspark_*` modules finds the connector from any
# working directory (an import hook, the default mode, is invisible to it).
EDITABLE := --config-settings editable_mode=compat

$(RUNTIME_STAMP): pyproject.toml $(HOT) | $(VENV)/bin/pip
	$(BIN)/pip install --quiet $(EDITABLE) -e .
	touch $(RUNTIME_STAMP)

$(CLUSTER_STAMP): pyproject.toml $(HOT) | $(VENV)/bin/pip
	$(BIN)/pip install --quiet $(EDITABLE) -e '.[cluster]'
	touch $(CLUSTER_STAMP)

# The test set-up adds the developer tools beside the product (tools/pyproject.toml:
# magnetar_chaos and its command `magnetar-chaos`, and the process harness).
$(STAMP): pyproject.toml tools/pyproject.toml $(HOT) | $(VENV)/bin/pip
	$(BIN)/pip install --quiet $(EDITABLE) -e '.[test]' -e ./tools
	touch $(STAMP)

# PORT=, ADMIN_PORT=, DATA= override the defaults: make standalone PORT=6660
standalone: $(RUNTIME_STAMP)
	$(BIN)/magnetar standalone --data-dir $(DATA) --port $(PORT) --admin-port $(ADMIN_PORT)

# A local 3-broker cluster with its own etcd (docs/cluster.md); Ctrl-C stops it all.
# STORAGE=object: ledgers in a SeaweedFS of its own (docs/object-storage.md).
STORAGE ?= file
cluster: $(CLUSTER_STAMP)
	$(BIN)/magnetar cluster up --brokers 3 --data-dir ./cluster-data --port $(PORT) --admin-port $(ADMIN_PORT) --storage $(STORAGE)

# Two worker processes, a test file each at a time (a module's shared broker stays
# in one process): most tests wait on brokers, etcd or SeaweedFS rather than compute.
# TEST_WORKERS=0 runs them in this process (pytest-xdist's -n 0).
# --durations=30: every run's log names its slowest tests (the suite must stay under 25 min on 2 cores).
TEST_WORKERS ?= 2
test: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=30

# The edit loop: the unit tests and the fast integration tests (one broker each,
# no cluster, no kill loops); `make test` stays the whole suite.
# Measured: 7 min 48 s wall on the 2-core development machine shared with ~8 other
# sessions (load 8-15), 1 min 55 s CPU (user+sys of pytest and its brokers), 1,107 tests;
# not yet shown under 3 min on a quiet machine.
CHECK_INTEGRATION := $(addprefix tests/integration/,test_admin_rest.py test_admin_schemas.py \
  test_admin_partitions.py test_admin_retention_ttl.py test_backlog_quota.py test_tls.py \
  test_tls_test_certs.py test_encryption.py test_metrics.py test_leader_election_example.py \
  test_advertised_listeners.py)
check: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile tests/unit $(CHECK_INTEGRATION)

unit: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit

integration: $(STAMP)
	$(BIN)/python -m pytest -q tests/integration

# The web console in a real headless Chromium (docs/console.md): Debian's chromium and
# chromium-driver, installed here when missing (root), else one line says what to install.
console-test: $(STAMP)
	@if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "make console-test: installing Debian's chromium and chromium-driver"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null) || exit 1; \
	  else \
	    echo "make console-test: needs Debian's chromium and chromium-driver: sudo apt-get install -y chromium chromium-driver"; exit 1; \
	  fi; \
	fi
	$(BIN)/python -m pytest -q -p no:cacheprovider --override-ini addopts= tests/integration/console

# Fault injection (docs/reliability.md): first the chaos tests (every
# test_chaos_*.py: short runs with one fault each, -m chaos; make test leaves
# them out), then a bounded run for CI, fixed seeds,
# the standalone broker then a 3-broker cluster on etcd (its faults include
# bundle moves, moves whose destination or source is killed meanwhile or whose source is paused
# past its session, and splits, some whose owner is killed meanwhile, in the same 45 s),
# then the cluster on object storage (its SeaweedFS killed and paused, a broker
# killed and its data directory deleted), then two replicating regions (region B's copy checked too, a consumer failing over between them);
# exit code 1 if the checker finds an
# anomaly; then the live-socket fuzzer (each seed on a standalone broker, then once, seed 1, on one
# broker of a 3-broker cluster: about 45 s); then one standalone run
# on the interval sync policy (30 s); then, as root only
# (it makes network namespaces), one cluster run with network partitions, moves whose source
# or destination is partitioned midway among them, then one on object storage with a broker cut
# from the object store only (cut-objectstore) among the partitions; then, as root,
# the deployment of docs/deploy.md on hosts with faults between them (chaos-hosts).
# The first two also draw fsync-error (EIO from fsync, injected with strace)
# where this machine may ptrace; a line says so when it may not.
# chaos-soak: the long one.
CHAOS_SEEDS ?= 1 2
CHAOS_SECONDS ?= 45
FUZZ_ROUNDS ?= 1000
CLUSTER_FUZZ_ROUNDS ?= 500
CHAOS_PARTITION_SECONDS ?= 30
chaos: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m chaos tests/integration
	@reason=$$($(BIN)/python -c 'from magnetar_chaos.fsync import unavailable_reason as r; print(r() or "")'); \
	if [ -z "$$reason" ]; then fsync=,fsync-error; else fsync=; echo "make chaos: leaving fsync-error out: $$reason"; fi; \
	for seed in $(CHAOS_SEEDS); do \
	  $(BIN)/magnetar-chaos run --duration $(CHAOS_SECONDS) --faults kill,pause,restart,cut$$fsync --seed $$seed --out ./chaos-out || exit 1; \
	  $(BIN)/magnetar-chaos run --topology cluster --duration $(CHAOS_SECONDS) \
	    --faults kill,pause,restart,kill-etcd,pause-etcd,move,move-kill,move-kill-source,move-pause-source,split,split-kill$$fsync --seed $$seed --out ./chaos-out/cluster || exit 1; \
	  $(BIN)/magnetar-chaos run --topology cluster --storage object --duration $(CHAOS_SECONDS) \
	    --faults kill,pause,restart,kill-etcd,pause-etcd,kill-objectstore,pause-objectstore,kill-wipe,move,move-kill-source,move-pause-source --seed $$seed --out ./chaos-out/object || exit 1; \
	  $(BIN)/magnetar-chaos run --topology regions --duration $(CHAOS_SECONDS) \
	    --faults kill,pause,restart,cut,kill-etcd,pause-etcd,failover --seed $$seed --out ./chaos-out/regions || exit 1; \
	  $(BIN)/magnetar-chaos fuzz --rounds $(FUZZ_ROUNDS) --seed $$seed --out ./chaos-out/fuzz || exit 1; \
	done
	$(BIN)/magnetar-chaos fuzz --topology cluster --rounds $(CLUSTER_FUZZ_ROUNDS) --seed 1 --out ./chaos-out/fuzz-cluster
	@$(MAKE) --no-print-directory chaos-interval
	@$(MAKE) --no-print-directory chaos-partition
	@$(MAKE) --no-print-directory chaos-hosts

# The faults with the brokers on the interval sync policy (receipts after write(),
# fdatasync every 100 ms): one seed, a fault every 1-2 s, 30 s on the standalone broker
# (seed 3 draws fsync-error twice in 30 s; seeds 1 and 2 drew none), then 30 s on a
# cluster and 30 s on two regions: about 3 minutes in all.
CHAOS_INTERVAL_SECONDS ?= 30
chaos-interval: $(STAMP)
	@reason=$$($(BIN)/python -c 'from magnetar_chaos.fsync import unavailable_reason as r; print(r() or "")'); \
	if [ -z "$$reason" ]; then fsync=,fsync-error; else fsync=; fi; \
	$(BIN)/magnetar-chaos run --sync-policy interval --duration $(CHAOS_INTERVAL_SECONDS) --interval 1,2 \
	  --faults kill,pause,restart,cut$$fsync --seed 3 --out ./chaos-out/interval || exit 1; \
	$(BIN)/magnetar-chaos run --topology cluster --sync-policy interval --duration $(CHAOS_INTERVAL_SECONDS) --interval 1,2 \
	  --faults kill,pause,restart,move,move-kill-source,split-kill$$fsync --seed 3 --out ./chaos-out/interval-cluster || exit 1; \
	$(BIN)/magnetar-chaos run --topology regions --sync-policy interval --duration $(CHAOS_INTERVAL_SECONDS) --interval 1,2 \
	  --faults kill,pause,cut,failover --seed 3 --out ./chaos-out/interval-regions || exit 1

# Brokers in network namespaces, partitioned by the nemesis: root only; a
# line says why it is skipped otherwise (CI machines may not be root).
chaos-partition: $(STAMP)
	@if [ "$$(id -u)" != 0 ]; then \
	  echo "make chaos: skipping the partition run: it makes network namespaces and veth pairs, which needs root"; \
	elif ! command -v ip >/dev/null; then \
	  echo "make chaos: skipping the partition run: it needs the ip command (iproute2)"; \
	else \
	  $(BIN)/magnetar-chaos run --topology cluster --duration $(CHAOS_PARTITION_SECONDS) \
	    --faults partition,kill,pause,move-partition-source,move-partition-destination --seed 1 --out ./chaos-out/partition || exit 1; \
	  $(BIN)/magnetar-chaos run --topology cluster --storage object --duration $(CHAOS_PARTITION_SECONDS) \
	    --faults cut-objectstore,partition,kill-wipe,pause --seed 1 --out ./chaos-out/partition-object || exit 1; \
	fi

# The deployment of docs/deploy.md on a test bed of hosts (network namespaces:
# 3 brokers on object storage, a 3-member etcd, SeaweedFS split over 6 hosts,
# the workloads on a client host), the nemesis cutting and losing hosts
# (magnetar_chaos/host_faults.py): a fault 0.5-1 s after each heal, 150 s,
# about 4 minutes with the start and the final reads; seed 728 draws each of
# the 11 faults among its first 13. Root only: a line says so otherwise, and
# CI (MAGNETAR_FORBID_SKIPS=1) fails instead.
CHAOS_HOSTS_SECONDS ?= 150
CHAOS_HOSTS_SEED ?= 728
CHAOS_HOSTS_FAULTS = etcd-cut-broker,objectstore-cut-broker,objectstore-isolated,volume-lost,etcd-member-partitioned,etcd-leader-lost,etcd-peers-cut,client-cut,asymmetric,broker-host-lost,slow-link
chaos-hosts: $(STAMP)
	@reason=$$($(BIN)/python -c 'from magnetar_harness.hosts import unavailable_reason as r; print(r() or "")'); \
	if [ -n "$$reason" ]; then \
	  if [ "$$MAGNETAR_FORBID_SKIPS" = 1 ]; then echo "make chaos-hosts: $$reason"; exit 1; fi; \
	  echo "make chaos: skipping the hosts run: $$reason"; \
	else \
	  $(BIN)/magnetar-chaos run --topology hosts --duration $(CHAOS_HOSTS_SECONDS) --interval 0.5,1 \
	    --faults $(CHAOS_HOSTS_FAULTS) --seed $(CHAOS_HOSTS_SEED) --out ./chaos-out/hosts || exit 1; \
	fi

# One long run on the hosts (root): every host fault, 4 nemeses at once on disjoint
# hosts, a fault 0.1-0.3 s after each one's heal, a 2.5 s session (every hold scaled
# with it); CHAOS_SOAK_HOSTS_SECONDS sizes it (docs/reliability.md records a run and
# its faults per minute). Its seed names its bed (hc<seed>: namespaces, bridge,
# subnet, /tmp/mg-hc<seed>), apart from make chaos-hosts's hc728.
CHAOS_SOAK_HOSTS_SECONDS ?= 3600
CHAOS_SOAK_HOSTS_SEED ?= 502
CHAOS_SOAK_HOSTS_NEMESES ?= 4
CHAOS_SOAK_HOSTS_SESSION_TTL ?= 2.5
chaos-soak-hosts: $(STAMP)
	$(BIN)/magnetar-chaos run --topology hosts --duration $(CHAOS_SOAK_HOSTS_SECONDS) --interval 0.1,0.3 \
	  --nemeses $(CHAOS_SOAK_HOSTS_NEMESES) --session-ttl $(CHAOS_SOAK_HOSTS_SESSION_TTL) \
	  --faults $(CHAOS_HOSTS_FAULTS) --seed $(CHAOS_SOAK_HOSTS_SEED) --out ./chaos-out/soak-hosts

chaos-soak: $(STAMP)
	$(MAKE) chaos CHAOS_SEEDS="1 2 3 4 5 6 7 8 9 10" CHAOS_SECONDS=600 FUZZ_ROUNDS=20000 CLUSTER_FUZZ_ROUNDS=5000 CHAOS_PARTITION_SECONDS=600 \
	  CHAOS_INTERVAL_SECONDS=600

# One long run of the cluster on object storage: every cluster fault and every
# object store fault (cut-objectstore too where network namespaces can be
# made), a fault 0.1-0.3 s after each heal: 4-6 s per fault with the brokers'
# restarts (docs/reliability.md records a run); CHAOS_SOAK_OBJECT_SECONDS sizes it:
# 5,100 s gives about 1,070 faults on 2 cores (4,650 s gave 1,052 in one run
# and was on course for about 975 in the next).
CHAOS_SOAK_OBJECT_SECONDS ?= 5100
CHAOS_SOAK_OBJECT_SEED ?= 401
chaos-soak-object: $(STAMP)
	@reason=$$($(BIN)/python -c 'from magnetar_chaos.netns import unavailable_reason as r; print(r() or "")'); \
	if [ -z "$$reason" ]; then cut=,cut-objectstore; else cut=; echo "make chaos-soak-object: leaving cut-objectstore out: $$reason"; fi; \
	$(BIN)/magnetar-chaos run --topology cluster --storage object --duration $(CHAOS_SOAK_OBJECT_SECONDS) --interval 0.1,0.3 \
	  --faults kill,pause,restart,kill-etcd,pause-etcd,move,move-kill,move-kill-source,move-pause-source,split,split-kill,kill-objectstore,pause-objectstore,kill-wipe$$cut \
	  --seed $(CHAOS_SOAK_OBJECT_SEED) --out ./chaos-out/soak-object

proto: $(STAMP)
	$(BIN)/python -m magnetar.protocol.generate

proto-check: $(STAMP)
	$(BIN)/python -m magnetar.protocol.generate --check

BENCH_STAMP := $(VENV)/.bench-installed

# The Spark connector's tests under another Spark release the spark extra allows,
# in a venv of its own (docs/spark.md, "Supported Spark"): the suite runs the newest.
SPARK_VERSION ?= 4.2.1
SPARK_VENV := .venv-spark-$(SPARK_VERSION)
spark-compat:
	@test -x $(SPARK_VENV)/bin/pip || $(PYTHON) -m venv $(SPARK_VENV)
	$(SPARK_VENV)/bin/pip install --quiet --upgrade pip
	$(SPARK_VENV)/bin/pip install --quiet $(EDITABLE) -e '.[test]' -e ./tools
	$(SPARK_VENV)/bin/pip install --quiet 'pyspark==$(SPARK_VERSION)'
	$(SPARK_VENV)/bin/python -c "import pyspark; assert pyspark.__version__ == '$(SPARK_VERSION)', pyspark.__version__"
	$(SPARK_VENV)/bin/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile tests/unit/spark tests/integration/spark

$(BENCH_STAMP): pyproject.toml $(STAMP)
	$(BIN)/pip install --quiet -e '.[test,bench]'
	touch $(BENCH_STAMP)

# Magnetar vs NATS JetStream, every workload (~10 min on 2 cores); see bench/README.md.
bench: $(BENCH_STAMP)
	$(BIN)/python -m bench.run

bench-quick: $(BENCH_STAMP)
	$(BIN)/python -m bench.run --quick

# py-spy profile of the broker under workload 1.
profile: $(BENCH_STAMP)
	$(BIN)/python -m bench.profile

clean:
	rm -rf $(VENV) build tools/build *.egg-info

# The deployment of docs/deploy.md on a test bed of hosts (network namespaces on a
# bridge, root only): 3 brokers on object storage, a 3-member etcd, SeaweedFS split
# over 6 hosts, a client host, a Spark standalone master and 2 workers. hosts-up
# prints every part's host, address, ports and log and leaves them running;
# hosts-down stops them and deletes the namespaces. HOSTS_TAG names them (mg-TAG-*).
HOSTS_TAG ?= hosts
hosts-up: $(STAMP)
	$(BIN)/magnetar-chaos hosts up --tag $(HOSTS_TAG)

hosts-down: $(STAMP)
	$(BIN)/magnetar-chaos hosts down --tag $(HOSTS_TAG)

"""Spark's standalone daemons (master, worker) from the pip-installed
pyspark, for the test bed of hosts: ``spark-class <main class> ...`` (what
pyspark's ``sbin/start-master.sh`` and ``start-worker.sh`` run, without
their daemonizing), small heaps, bound to the host's own address."""
from __future__ import annotations

import sys
from pathlib import Path


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def spark_daemon_command(main_class: str, args: list[str]) -> list[str]:
    return [str(spark_home() / "bin" / "spark-class"), main_class, *args]


def spark_env(address: str, root: Path) -> dict[str, str]:
    """The environment of a daemon (and of the executors it starts) on the
    host at ``address``: the venv's Python for PySpark workers (the
    connector is importable there), 256 MiB daemon heaps."""
    (root / "spark-logs").mkdir(parents=True, exist_ok=True)
    return {"SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": address, "SPARK_PUBLIC_DNS": address,
            "SPARK_DAEMON_MEMORY": "256m", "SPARK_LOG_DIR": str(root / "spark-logs"),
            "SPARK_WORKER_DIR": str(root / "work"), "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable}

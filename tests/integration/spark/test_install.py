"""``format("magnetar")`` works from a plain install, from any working
directory: the package is installed (a wheel build, C extension included)
into a fresh directory that is the Python workers' only addition to
sys.path, and a Spark job started elsewhere (cwd = a temporary directory,
not the repository) writes and reads a topic without registering anything.
Spark finds ``pyspark_magnetar`` by its module name on the workers' path."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from .conftest import REPO

JOB = textwrap.dedent("""
    import sys
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    url = sys.argv[1]
    spark.range(5).selectExpr("cast(cast(id as string) as binary) as value").write.format("magnetar") \\
        .option("service_url", url).option("topic", "installed").mode("append").save()
    n = spark.read.format("magnetar").option("service_url", url).option("topic", "installed").load().count()
    import pyspark_magnetar, pyspark_magnetar.entry_columns as ec
    print("rows", n, "from", pyspark_magnetar.__file__, ec.implementation())
    spark.stop()
""")


def test_format_magnetar_from_an_installed_package_in_another_directory(broker, tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(REPO)], check=True, cwd=tmp_path, timeout=600)
    (tmp_path / "job.py").write_text(JOB)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON")}
    env.update(PYTHONPATH=str(target), PYSPARK_PYTHON=sys.executable)
    out = subprocess.run([sys.executable, "job.py", broker.service_url], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"rows 5 from {target}" in out.stdout, out.stdout
    assert "compiled" in out.stdout

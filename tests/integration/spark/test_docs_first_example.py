"""docs/spark.md's first example runs as written where `python3` is not the
interpreter that has the connector and PYSPARK_PYTHON is not set (a new
user's shell): Spark looks ``format("magnetar")`` up in its Python workers,
and without the example's PYSPARK_PYTHON line they run that `python3` and
the read fails with DATA_SOURCE_NOT_FOUND."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pulsar

from tests.helpers import quiet_logger

from .conftest import REPO


def _first_example() -> str:
    text = (REPO / "docs" / "spark.md").read_text()
    start = text.index("```python\n") + len("```python\n")
    return text[start:text.index("```", start)]


def test_the_first_example_reads_a_topic_without_pyspark_python_set(broker, tmp_path):
    client = pulsar.Client(broker.service_url, logger=quiet_logger())
    producer = client.create_producer("persistent://public/default/orders")
    for i in range(3):
        producer.send(b"order-%d" % i)
    client.close()
    # A `python3` first on the PATH that lacks the connector: the base interpreter, outside the venv.
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python3").symlink_to(Path(sys.base_prefix) / "bin" / "python3")
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH")}
    env["PATH"] = f"{bare}:{env.get('PATH', '')}"
    script = _first_example().replace("pulsar://localhost:6650", broker.service_url)
    script += "\nprint('rows', df.count())\nspark.stop()\n"
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "rows 3" in out.stdout, out.stdout

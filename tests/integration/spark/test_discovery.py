"""`format("magnetar")` is found by Spark's own scan from any directory.

Spark registers Python data sources by scanning ``pkgutil.iter_modules()`` on
its workers for top-level ``pyspark_*`` modules. An editable install made with
an import hook (pip's default mode) is invisible to that scan, so the
project's install must put the package on ``sys.path`` (the Makefile installs
in compat mode). This checks the install the suite runs on, from a directory
that is not the checkout and without PYTHONPATH.
"""
import os
import subprocess
import sys

SCAN = (
    "import pkgutil, sys\n"
    "found = [m.name for m in pkgutil.iter_modules() if m.name.startswith('pyspark_')]\n"
    "print(' '.join(found))\n"
)


def test_spark_scan_finds_the_connector_from_any_directory(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", SCAN], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "pyspark_magnetar" in done.stdout.split(), (
        "Spark's data source scan does not see pyspark_magnetar from another directory: "
        "install with `make install` (editable in compat mode) or a regular `pip install .`")

"""Loads ``bench/gc_census.py`` by its path into a broker started with this
directory on ``PYTHONPATH`` and ``MAGNETAR_GC_CENSUS`` set (see that module;
other processes, such as ``cluster up`` itself, are left alone)."""
import importlib.util
import os
import pathlib

if os.environ.get("MAGNETAR_GC_CENSUS"):
    _spec = importlib.util.spec_from_file_location(
        "magnetar_bench_gc_census", pathlib.Path(__file__).resolve().parent.parent / "gc_census.py")
    _census = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_census)
    _census.install_from_env()

"""Loads ``bench/gc_census.py`` and ``bench/broker_timeline.py`` by their
paths into a broker started with this directory on ``PYTHONPATH`` and
``MAGNETAR_GC_CENSUS`` or ``MAGNETAR_BROKER_TIMELINE`` set (see those
modules; other processes, such as ``cluster up`` itself, are left alone)."""
import importlib.util
import os
import pathlib
import sys


def _load(name, file):
    spec = importlib.util.spec_from_file_location(name, pathlib.Path(__file__).resolve().parent.parent / file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if os.environ.get("MAGNETAR_GC_CENSUS") or os.environ.get("MAGNETAR_BROKER_TIMELINE"):
    _census = _load("magnetar_bench_gc_census", "gc_census.py")
    _census.install_from_env()
    if os.environ.get("MAGNETAR_BROKER_TIMELINE"):
        _load("magnetar_bench_broker_timeline", "broker_timeline.py").install_from_env(
            lambda: _census.is_broker(list(getattr(sys, "orig_argv", sys.argv))))

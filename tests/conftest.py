"""Fixtures every test may use. Plain helpers (waiting, names, loggers) are in
tests/helpers.py; the processes a test starts are magnetar_harness's."""
from __future__ import annotations

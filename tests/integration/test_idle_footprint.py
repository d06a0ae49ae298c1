"""A running standalone broker without security or a cluster has not loaded
the native libraries of the optional code (cryptography, bcrypt): what
tests/unit/test_idle_imports.py checks of the imports, seen in the process."""
from __future__ import annotations

from tests.helpers import start_broker, stop_broker


def test_an_idle_standalone_broker_maps_no_crypto_library(tmp_path):
    broker = start_broker(tmp_path)
    try:
        maps = open(f"/proc/{broker.proc.pid}/maps").read()
        assert "aiohttp" in maps  # the probe reads the right process: its HTTP server's native parts
        loaded = {line.split()[-1] for line in maps.splitlines() if ".so" in line}
        assert not [lib for lib in loaded if "/cryptography/" in lib or "_bcrypt" in lib], loaded
    finally:
        stop_broker(broker)

"""`magnetar produce` and `magnetar consume` against a real broker."""
from __future__ import annotations

import subprocess
import sys


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "magnetar.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_produce_then_consume(broker):
    out = _cli("produce", "cli-topic", "-m", "hello", "-m", "world", "-n", "2", "-u", broker.service_url)
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.strip().splitlines()) == 4
    out = _cli("consume", "cli-topic", "-s", "cli-sub", "-n", "4", "-u", broker.service_url, "--timeout", "10")
    assert out.returncode == 0, out.stderr
    bodies = [line.split(" ", 1)[1] for line in out.stdout.strip().splitlines()]
    assert bodies == ["hello", "world", "hello", "world"]
    # Acknowledged: a second run of the same subscription finds nothing new.
    out = _cli("consume", "cli-topic", "-s", "cli-sub", "-n", "1", "-u", broker.service_url, "--timeout", "1")
    assert out.returncode == 1 and "no message" in out.stderr


def test_bad_arguments_get_clear_errors(broker):
    out = _cli("consume", "t", "-s", "s", "-t", "Sideways", "-u", broker.service_url)
    assert out.returncode == 2 and "unknown subscription type" in out.stderr
    out = _cli("produce", "bad://x", "-m", "m", "-u", broker.service_url)
    assert out.returncode == 1 and "error" in out.stderr.lower()
    out = _cli("standalone", "--config", "/nonexistent.toml")
    assert out.returncode == 2 and "does not exist" in out.stderr


def test_produce_files_properties_and_a_rate_then_consume_key_shared(broker, tmp_path):
    payload = tmp_path / "event.json"
    payload.write_bytes(b'{"id": 7}')
    out = _cli("produce", "cli-props", "-f", str(payload), "-m", "plain", "-k", "user-1", "-p", "source=cli",
               "-p", "v=2", "-n", "3", "-r", "20", "-u", broker.service_url)
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.strip().splitlines()) == 6
    out = _cli("consume", "cli-props", "-s", "ks", "-t", "Key_Shared", "-n", "2", "-u", broker.service_url,
               "--timeout", "10")
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.strip().splitlines()
    assert "key=user-1" in first and "properties=source=cli,v=2" in first
    assert first.endswith("plain") and second.endswith('{"id": 7}')


def test_more_bad_arguments_get_clear_errors(broker, tmp_path):
    out = _cli("consume", "t", "-s", "s", "-n", "-5", "-u", broker.service_url)
    assert out.returncode == 2 and "--num-messages" in out.stderr
    out = _cli("produce", "t", "-p", "novalue", "-m", "x", "-u", broker.service_url)
    assert out.returncode == 2 and "key=value" in out.stderr
    out = _cli("produce", "t", "-f", str(tmp_path / "missing.bin"), "-u", broker.service_url)
    assert out.returncode == 2 and "cannot read" in out.stderr
    out = _cli("produce", "t", "-u", broker.service_url)
    assert out.returncode == 2 and "nothing to send" in out.stderr

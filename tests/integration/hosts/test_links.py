"""A degraded link between hosts of the test bed (magnetar_chaos/host_links.py):
a program on the source host dials the destination's own address and its
round trips take the proxy's delay; a third host still reaches the
destination straight; the link taken down leaves the source dialling
straight again. Root only: not root fails with one line (CI runs as root)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from magnetar_chaos.host_links import HostLink
from magnetar_chaos.link_proxy import LinkSettings
from magnetar_harness.hosts import HostBed, unavailable_reason
from magnetar_harness.waiting import wait_for

# An echo server that answers its first line with the address it sees the peer at.
SERVER = ("import socket,sys\ns=socket.create_server((sys.argv[1],int(sys.argv[2])))\n"
          "while True:\n c,a=s.accept()\n f=c.makefile('rwb',0)\n f.write((a[0]+'\\n').encode())\n"
          " try:\n  while d:=c.recv(65536): c.sendall(d)\n except OSError: pass\n c.close()\n")
# Connects, reads the peer address line, times 20 one-byte round trips: JSON on stdout.
CLIENT = ("import socket,sys,time,json\nc=socket.create_connection((sys.argv[1],int(sys.argv[2])),timeout=5)\n"
          "c.setsockopt(socket.IPPROTO_TCP,socket.TCP_NODELAY,1)\nf=c.makefile('rb',0)\nseen=f.readline().decode().strip()\n"
          "rtts=[]\nfor i in range(20):\n t=time.perf_counter(); c.sendall(b'x'); assert c.recv(1)==b'x'; "
          "rtts.append(time.perf_counter()-t)\nprint(json.dumps({'seen_as':seen,'min_rtt':min(rtts)}))\n")
PORT = 7000


@pytest.fixture
def bed(tmp_path):
    reason = unavailable_reason()
    if reason:
        pytest.fail(f"the test bed cannot run here: {reason}", pytrace=False)
    made = HostBed("hlinkt", ["a", "b", "c"]).setup()
    made.start("b", "echo", [sys.executable, "-c", SERVER, made.address("b"), str(PORT)], tmp_path / "echo.log")
    yield made
    made.teardown()


def _dial(bed: HostBed, source: str) -> dict | None:
    result = bed.run(source, [sys.executable, "-c", CLIENT, bed.address("b"), str(PORT)], check=False, timeout=60)
    return json.loads(result.stdout) if result.returncode == 0 else None


def test_a_program_on_the_source_host_dials_as_always_and_gets_the_delay(bed):
    straight = wait_for(lambda: _dial(bed, "a"), 10, 0.1, "b's echo server from a")
    assert straight["seen_as"] == bed.address("a")
    link = HostLink(bed, "a", [(bed.address("b"), PORT)], LinkSettings(delay_s=0.01)).up()
    try:
        through = _dial(bed, "a")
        assert through is not None, "a could not reach b through the link"
        assert through["min_rtt"] >= 0.02, f"round trips through a 10 ms link took {through}"
        assert through["seen_as"] == bed.gateway, "the proxy connects on from the bridge's address"
        # A third host reaches b straight: a does not answer for b's address on the bridge.
        others = _dial(bed, "c")
        assert others is not None and others["seen_as"] == bed.address("c") and others["min_rtt"] < 0.02
        assert link.proxy.stats().connections == 1
        link.proxy.set(stall=True)
        stalled = subprocess.run(bed_exec(bed, "a", "import socket,sys;c=socket.create_connection((sys.argv[1],"
                                          "int(sys.argv[2])),timeout=1);c.settimeout(1);c.recv(100)"),
                                 capture_output=True, text=True, timeout=30)
        assert stalled.returncode != 0 and "timed out" in stalled.stderr, "a stalled link answered"
        link.proxy.set(stall=False)
    finally:
        link.down()
    link.down()  # idempotent
    back = json.loads(bed.run("a", [sys.executable, "-c", CLIENT, bed.address("b"), str(PORT)], timeout=60).stdout)
    assert back["seen_as"] == bed.address("a"), "after down, a dials b straight again"
    lo = subprocess.run(["ip", "-n", bed.namespace("a"), "addr", "show", "dev", "lo"], capture_output=True, text=True)
    assert bed.address("b") not in lo.stdout


def bed_exec(bed: HostBed, host: str, code: str) -> list[str]:
    return ["ip", "netns", "exec", bed.namespace(host), sys.executable, "-c", code, bed.address("b"), str(PORT)]

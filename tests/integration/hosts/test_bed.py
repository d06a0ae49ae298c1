"""The test bed itself (magnetar_harness/hosts.py): hosts reach each other by
their addresses, a one-way cut is one-way, a bed of a tag in use is not taken
over unless asked, and nothing of ours is left after teardown. Root only: not
root fails with one line (CI runs as root)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from magnetar_harness.hosts import HostBed, HostsError, unavailable_reason

PROBE = ("import socket,sys\ntry:\n socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1)\n"
         "except OSError:\n sys.exit(1)")


@pytest.fixture
def bed():
    reason = unavailable_reason()
    if reason:
        pytest.fail(f"the test bed cannot run here: {reason}", pytrace=False)
    made = HostBed("hbed", ["a", "b"]).setup()
    yield made
    made.teardown()


def _reaches(bed: HostBed, source: str, destination: str, port: int) -> bool:
    return bed.run(source, [sys.executable, "-c", PROBE, bed.address(destination), str(port)],
                   check=False).returncode == 0


def test_hosts_reach_each_other_and_a_cut_is_one_way(bed, tmp_path):
    server = bed.start("b", "server", [sys.executable, "-m", "http.server", "--bind", bed.address("b"), "8000"],
                       tmp_path / "server.log")
    from magnetar_harness.waiting import wait_for

    wait_for(lambda: _reaches(bed, "a", "b", 8000), 10, 0.1, "b's server from a")
    bed.cut("a", "b")
    assert not _reaches(bed, "a", "b", 8000)
    bed.heal()
    assert _reaches(bed, "a", "b", 8000)
    server.stop()


def test_a_bed_at_work_is_refused_unless_replaced_and_teardown_leaves_nothing(bed, tmp_path):
    from magnetar_harness.waiting import wait_for

    bed.start("a", "sleeper", ["sleep", "60"], tmp_path / "sleep.log")
    # Popen returns once `setpriv` runs; `ip netns exec` enters a's namespace
    # a moment later, and only then is the bed "at work".
    wait_for(lambda: subprocess.run(["ip", "netns", "pids", bed.namespace("a")], capture_output=True,
                                    text=True).stdout.split(), 10, 0.05, "the sleeper in a's namespace")
    with pytest.raises(HostsError, match="another test bed"):
        HostBed("hbed", ["a", "b"]).setup()
    other = HostBed("hbed", ["a", "b"]).setup(replace=True)
    other.teardown()
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    assert "mg-hbed-" not in names and "mghbed" not in links


def test_a_thread_moved_onto_a_host_and_the_threads_it_starts_reach_the_others_by_address(bed, tmp_path):
    """The chaos run's clients live so (magnetar_chaos/thread_netns.py): a
    thread on host a reaches b's address, the machine's own threads do not
    see a's address as theirs, and the thread comes home."""
    import socket
    import threading

    from magnetar_chaos import thread_netns
    from magnetar_harness.waiting import wait_for

    bed.start("b", "server", [sys.executable, "-m", "http.server", "--bind", bed.address("b"), "8000"],
              tmp_path / "server.log")
    wait_for(lambda: _reaches(bed, "a", "b", 8000), 10, 0.1, "b's server from a")
    seen: dict[str, object] = {}

    def on_a() -> None:
        home = thread_netns.current()
        thread_netns.enter(thread_netns.named(bed.namespace("a")))
        try:
            def child() -> None:  # started on a: on a too
                with socket.socket() as s:
                    s.bind((bed.address("a"), 0))  # a's address is local here
                    seen["child_bound"] = True
            t = threading.Thread(target=child)
            t.start()
            t.join()
            socket.create_connection((bed.address("b"), 8000), timeout=5).close()
            seen["reached"] = True
        finally:
            thread_netns.enter(home)
            os.close(home)

    runner = threading.Thread(target=on_a)
    runner.start()
    runner.join()
    assert seen == {"child_bound": True, "reached": True}
    with socket.socket() as s, pytest.raises(OSError):  # the machine's own thread: a's address is not its own
        s.bind((bed.address("a"), 0))

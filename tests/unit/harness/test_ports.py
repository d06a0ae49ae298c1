"""Ports for servers that restart on the same address: out of the kernel's
ephemeral range (where client sockets get theirs), one slice per xdist worker."""
from magnetar.processes import ports


def test_ports_lie_below_the_ephemeral_range_and_are_not_handed_out_twice_soon(monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    low = ports.ephemeral_low()
    bases = [ports.free_port_block(6) for _ in range(20)]
    singles = [ports.free_port() for _ in range(50)]
    assert all(ports.FLOOR <= b and b + 6 <= low for b in bases)
    assert all(ports.FLOOR <= p < low for p in singles)
    handed = [p for b in bases for p in range(b, b + 6)] + singles
    assert len(set(handed)) == len(handed)


def test_two_xdist_workers_draw_from_disjoint_slices(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    slices = []
    for worker in ("gw0", "gw1"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        slices.append(ports.worker_slice(10000, 32768))
    (a0, a1), (b0, b1) = slices
    assert a1 <= b0 and a0 < a1 and b0 < b1
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    for _ in range(20):
        assert b0 <= ports.free_port() < b1

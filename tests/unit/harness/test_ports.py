"""Port blocks for ``cluster up`` / ``geo up``: out of the kernel's ephemeral range, one slice per xdist worker."""
from magnetar_harness import ports


def test_a_block_lies_below_the_ephemeral_range_where_client_sockets_get_their_ports(monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    low = ports._ephemeral_low()
    for _ in range(20):
        base = ports.free_port_block(6)
        assert ports._FLOOR <= base and base + 6 <= low


def test_two_xdist_workers_draw_from_disjoint_slices(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    slices = []
    for worker in ("gw0", "gw1"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        slices.append(ports._worker_slice(10000, 32768))
    (a0, a1), (b0, b1) = slices
    assert a1 <= b0 and a0 < a1 and b0 < b1
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    for _ in range(20):
        assert b0 <= ports.free_port_block(6) < b1

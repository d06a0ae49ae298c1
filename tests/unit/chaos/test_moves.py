"""The move faults' planning: a destination other than the owner, asked
through a broker other than the destination, the same with the same seed."""
import random

from magnetar_chaos import moves

URLS = ["http://127.0.0.1:8080", "http://127.0.0.1:8081", "http://127.0.0.1:8082"]


def test_a_move_goes_elsewhere_and_is_never_asked_of_its_destination(monkeypatch):
    monkeypatch.setattr(moves, "_bundle_and_owner",
                        lambda urls, topic: (urls[0], "0x00000000_0x40000000", "127.0.0.1:8081"))
    rng = random.Random(1)
    planned = [moves.plan_move(URLS, "persistent://public/default/t", rng) for _ in range(50)]
    assert {m.destination for m in planned} == {"127.0.0.1:8080", "127.0.0.1:8082"}
    assert all(m.asked.removeprefix("http://") != m.destination for m in planned)
    again = random.Random(1)
    assert planned == [moves.plan_move(URLS, "persistent://public/default/t", again) for _ in range(50)]


def test_a_refused_move_is_described_not_raised(monkeypatch):
    import io
    import urllib.error

    def refuse(url, path, method="GET"):
        raise urllib.error.HTTPError(url + path, 412, "Precondition Failed", {},
                                     io.BytesIO(b'{"reason": "bundle is Releasing, not owned"}'))

    monkeypatch.setattr(moves, "_request", refuse)
    move = moves.Move(URLS[0], "persistent://public/default/t", "0x00000000_0x40000000", "127.0.0.1:8081",
                      "127.0.0.1:8082")
    what, done = moves.do_move(move, [u.removeprefix("http://") for u in URLS])
    assert not done
    assert what == "move 0x00000000_0x40000000 broker-1 -> broker-2: refused (412: bundle is Releasing, not owned)"

import random

import pytest

from magnetar.client.backoff import Backoff


def test_doubles_up_to_the_cap_without_jitter():
    b = Backoff(0.1, 30.0, jitter=0)
    delays = [b.next() for _ in range(12)]
    assert delays[:4] == pytest.approx([0.1, 0.2, 0.4, 0.8])
    assert max(delays) == 30.0 and delays[-1] == 30.0


def test_jitter_only_shortens():
    b = Backoff(0.1, 30.0, jitter=0.1, rng=random.Random(7))
    nominal = 0.1
    for _ in range(20):
        d = b.next()
        assert 0.9 * nominal <= d <= nominal
        nominal = min(nominal * 2, 30.0)


def test_reset_starts_over():
    b = Backoff(0.1, 30.0, jitter=0)
    for _ in range(5):
        b.next()
    b.reset()
    assert b.next() == pytest.approx(0.1)


def test_rejects_nonsense():
    with pytest.raises(ValueError):
        Backoff(0, 1)
    with pytest.raises(ValueError):
        Backoff(2, 1)

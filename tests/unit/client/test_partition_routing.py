"""Pulsar's key hashes and routing modes (magnetar.client.partition_routing)."""
from __future__ import annotations

import random

import pytest

from magnetar.client.errors import InvalidConfiguration
from magnetar.client.partition_routing import (HashingScheme, PartitionsRoutingMode, java_string_hash,
                                               murmur3_32_hash, router)


def test_java_string_hash_is_javas_string_hashcode_masked():
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322            # "hello".hashCode()
    assert java_string_hash("\U0001F600") == 55357 * 31 + 56832  # a surrogate pair: two UTF-16 units
    assert java_string_hash("polygenelubricants") == 0x80000000 & 0x7FFFFFFF  # hashCode() is MIN_VALUE


def test_murmur3_32_matches_the_reference_vectors():
    assert murmur3_32_hash("") == 0
    assert murmur3_32_hash("hello") == 0x248BFA47
    assert murmur3_32_hash("abc") == 0xB3DD93FA & 0x7FFFFFFF
    assert murmur3_32_hash("The quick brown fox jumps over the lazy dog") == 0x2E4FF723


def test_round_robin_single_and_custom():
    rr = router(3, rng=random.Random(1))
    picks = [rr(None, None) for _ in range(6)]
    assert sorted(picks) == [0, 0, 1, 1, 2, 2] and picks[:3] == picks[3:]
    single = router(5, PartitionsRoutingMode.UseSinglePartition, rng=random.Random(2))
    assert len({single(None, None) for _ in range(10)}) == 1
    assert rr(None, "k") == rr(None, "k") == java_string_hash("k") % 3  # keys beat the mode
    custom = router(4, PartitionsRoutingMode.CustomPartition, message_router=lambda m, n: n - 1)
    assert custom(None, "ignored") == 3


@pytest.mark.parametrize("kwargs, says", [
    ({"hashing_scheme": HashingScheme.BoostHash}, "BoostHash"),
    ({"mode": PartitionsRoutingMode.CustomPartition}, "message_router"),
])
def test_refusals(kwargs, says):
    with pytest.raises(InvalidConfiguration, match=says):
        router(4, **kwargs)

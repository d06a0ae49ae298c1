"""Pattern filtering and hashing of namespace topic lists."""
from __future__ import annotations

import re

import pytest

from magnetar.broker.server.topic_list import filter_topics, topics_hash

TOPICS = [
    "persistent://public/default/abc-1",
    "persistent://public/default/abc-p-partition-0",
    "persistent://public/default/abc-p-partition-1",
    "persistent://public/default/xabc-2",
    "persistent://public/default/abc",
]


def test_pattern_matches_the_whole_base_name_without_domain():
    assert filter_topics(TOPICS, "persistent://public/default/abc-.*") == TOPICS[:3]
    assert filter_topics(TOPICS, "public/default/abc-.*") == TOPICS[:3]
    assert filter_topics(TOPICS, "persistent://public/default/abc-p") == TOPICS[1:3]  # partitions of abc-p
    assert filter_topics(TOPICS, "persistent://public/default/abc") == [TOPICS[4]]
    assert filter_topics(TOPICS + ["not a topic//"], ".*") == TOPICS


def test_bad_pattern_raises():
    with pytest.raises(re.error):
        filter_topics(TOPICS, "persistent://public/default/(")


def test_hash_ignores_order_and_tells_sets_apart():
    assert topics_hash(TOPICS) == topics_hash(list(reversed(TOPICS)))
    assert topics_hash(["ab", "c"]) != topics_hash(["a", "bc"])
    assert topics_hash([]) != topics_hash(TOPICS)

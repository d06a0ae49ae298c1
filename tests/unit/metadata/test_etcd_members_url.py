"""An etcd URL naming the members of an etcd cluster: parsed in order, one
gRPC channel balancing over all of them; a single member unchanged."""
from __future__ import annotations

import pytest

from magnetar.metadata.etcd import grpc_target, parse_etcd_endpoints, parse_etcd_url


def test_several_members_are_parsed_in_order_with_the_prefix():
    endpoints, prefix = parse_etcd_endpoints("etcd://10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2380/prod")
    assert endpoints == [("10.0.0.1", 2379), ("10.0.0.2", 2379), ("10.0.0.3", 2380)]
    assert prefix == "/prod"
    assert parse_etcd_url("etcd://10.0.0.1:2379,10.0.0.2:2379/prod") == ("10.0.0.1", 2379, "/prod")


def test_one_member_keeps_its_name_for_grpc_to_resolve():
    assert grpc_target([("etcd-1.example", 2379)]) == ("etcd-1.example:2379", [])


def test_several_members_are_one_round_robin_channel_over_their_addresses():
    target, options = grpc_target([("127.0.0.1", 2379), ("localhost", 2380)])
    assert target in ("ipv4:127.0.0.1:2379,127.0.0.1:2380",)
    assert ("grpc.lb_policy_name", "round_robin") in options


@pytest.mark.parametrize("url", ["etcd://a:1,/p", "etcd://a:1,b/p", "etcd://a:1,b:x/p", "etcd://,a:1/p",
                                 "http://a:1,b:2/p", "etcd://a:1,b:2/p?x=1"])
def test_a_malformed_member_list_is_one_clear_error(url):
    with pytest.raises(ValueError, match="bad metadata store URL"):
        parse_etcd_endpoints(url)

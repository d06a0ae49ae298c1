"""Service URLs with several hosts: parsing, and the client trying them in turn."""
import asyncio

import pytest

from magnetar.client import errors
from magnetar.client.aio import AsyncClient
from magnetar.client.service_hosts import ServiceHosts, split_service_url
from magnetar.protocol import Type, command, pb


@pytest.mark.parametrize("url, hosts", [
    ("pulsar://a:6650", ["pulsar://a:6650"]),
    ("pulsar://a:6650/", ["pulsar://a:6650"]),
    ("pulsar://a:1,b:2,c:3", ["pulsar://a:1", "pulsar://b:2", "pulsar://c:3"]),
    ("pulsar://a,b:7", ["pulsar://a", "pulsar://b:7"]),
    ("pulsar+ssl://a:6651,b:6651", ["pulsar+ssl://a:6651", "pulsar+ssl://b:6651"]),
    ("pulsar://[::1]:6650,127.0.0.1:6651", ["pulsar://[::1]:6650", "pulsar://127.0.0.1:6651"]),
])
def test_a_service_url_splits_into_one_url_per_host(url, hosts):
    assert split_service_url(url) == hosts


@pytest.mark.parametrize("url, says", [
    ("http://a:8080", "unsupported service URL"),
    ("a:6650,b:6650", "unsupported service URL"),
    ("pulsar://", "empty host (number 1)"),
    ("pulsar://a:1,,b:2", "empty host (number 2)"),
    ("pulsar://a:1,b:2,", "empty host (number 3)"),
    ("pulsar://a:1,b:port", "host number 2 ('b:port')"),
    ("pulsar://a:1,b:99999", "host number 2"),
    ("pulsar://a:1,b:2/path", "something after its hosts"),
    ("pulsar://a:1?x=1", "something after its hosts"),
])
def test_bad_service_urls_are_invalid_url_errors_that_say_where(url, says):
    with pytest.raises(errors.InvalidUrl, match=None) as caught:
        split_service_url(url)
    assert says in str(caught.value)
    with pytest.raises(errors.InvalidUrl):
        AsyncClient(url)


def test_the_current_host_moves_on_only_when_it_is_the_one_that_failed():
    hosts = ServiceHosts("pulsar://a:1,b:2,c:3")
    assert hosts.current == "pulsar://a:1"
    hosts.failed("pulsar://b:2")  # a late failure of a host that is not current: nothing moves
    assert hosts.current == "pulsar://a:1"
    hosts.failed("pulsar://a:1")
    assert hosts.in_order() == ["pulsar://b:2", "pulsar://c:3", "pulsar://a:1"]
    hosts.failed("pulsar://b:2")
    hosts.failed("pulsar://c:3")
    assert hosts.current == "pulsar://a:1"  # wraps around


class FakeConn:
    """A connection whose broker answers every lookup with Connect to itself,
    or hangs (a paused broker) when ``hang``, or raises ``refusal`` (an error
    answer) when given."""

    def __init__(self, url: str, hang: bool, refusal: Exception | None = None) -> None:
        self.url, self.hang, self.refusal = url, hang, refusal

    async def request(self, cmd, timeout):
        if self.refusal is not None:
            raise self.refusal
        if self.hang:
            await asyncio.sleep(timeout)
            raise errors.Timeout(f"{self.url} did not answer")
        return command(Type.LOOKUP_RESPONSE, request_id=cmd.lookupTopic.request_id, brokerServiceUrl=self.url,
                       response=pb.CommandLookupTopicResponse.Connect)


def fake_client(url: str, dead=(), hanging=(), refusal: Exception | None = None) -> tuple[AsyncClient, list[str]]:
    client = AsyncClient(url, operation_timeout_seconds=3)
    tried: list[str] = []

    async def connection_to(target, timeout=None):
        tried.append(target)
        if target in dead:
            raise errors.ConnectError(f"cannot connect to {target}: refused")
        return FakeConn(target, target in hanging, refusal)

    client.connection_to = connection_to  # type: ignore[method-assign]
    return client, tried


async def test_a_lookup_tries_the_hosts_in_order_and_stays_on_the_one_that_answered():
    client, tried = fake_client("pulsar://a:1,b:2,c:3", dead={"pulsar://a:1", "pulsar://b:2"})
    assert await client.lookup("persistent://public/default/t") == "pulsar://c:3"
    assert tried == ["pulsar://a:1", "pulsar://b:2", "pulsar://c:3"]
    tried.clear()
    assert await client.lookup("persistent://public/default/t") == "pulsar://c:3"
    assert tried == ["pulsar://c:3"], "a dead host is not tried again while the current one answers"


async def test_a_host_that_hangs_gets_its_share_of_the_time_not_all_of_it():
    client, tried = fake_client("pulsar://a:1,b:2", hanging={"pulsar://a:1"})
    loop = asyncio.get_running_loop()
    began = loop.time()
    assert await client.lookup("persistent://public/default/t", timeout=2.0) == "pulsar://b:2"
    assert loop.time() - began < 1.5  # a:1 got half of 2 s
    assert tried == ["pulsar://a:1", "pulsar://b:2"]


async def test_when_no_host_answers_the_last_error_is_raised():
    client, tried = fake_client("pulsar://a:1,b:2", dead={"pulsar://a:1", "pulsar://b:2"})
    with pytest.raises(errors.ConnectError, match="b:2"):
        await client.lookup("persistent://public/default/t", timeout=1.0)
    assert tried == ["pulsar://a:1", "pulsar://b:2"]


async def test_not_ready_is_raised_and_the_next_call_asks_the_next_host():
    client, tried = fake_client("pulsar://a:1,b:2", refusal=errors.ServiceUnitNotReady("not yet"))
    with pytest.raises(errors.ServiceUnitNotReady):
        await client.lookup("persistent://public/default/t", timeout=1.0)
    assert tried == ["pulsar://a:1"], "the caller's backoff paces the retry"
    assert client._service_hosts.current == "pulsar://b:2", "a broker out of its session says: try another"


async def test_other_error_answers_come_from_a_live_broker_and_move_nothing():
    client, tried = fake_client("pulsar://a:1,b:2", refusal=errors.AuthorizationError("no"))
    with pytest.raises(errors.AuthorizationError):
        await client.lookup("persistent://public/default/t", timeout=1.0)
    assert tried == ["pulsar://a:1"] and client._service_hosts.current == "pulsar://a:1"

"""The two asyncio S3 clients we considered, against a local SeaweedFS.

Measures, one request at a time (what one broker's commit loop does):
64 KiB conditional PUTs (If-None-Match: *) and 4 KiB ranged GETs, p50 and
p99, first through magnetar's own store (obstore), then through aiobotocore
if it is importable (it is not a project dependency: install it in a
throwaway venv, or put its site-packages on PYTHONPATH).

    .venv/bin/python bench/object_store_clients.py [--requests 300] [--rounds 2]

The rounds alternate the clients so that background load hits both alike.

``--gets-at-once N[,N...]``: instead, the store's ranged-GET rate through
magnetar's store with N GETs under way at once (a cold reader's read-ahead
of a ledger whose entries each sit in another commit object): the ceiling
such a read cannot pass, whatever the broker does.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time

from magnetar.objectstore.s3 import open_object_store
from magnetar.objectstore.seaweed import SeaweedServer

SIZE = 64 * 1024


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3


async def bench_obstore(url: str, n: int, tag: str) -> tuple[list[float], list[float]]:
    data = os.urandom(SIZE)
    async with open_object_store(url) as store:
        for i in range(20):
            await store.put(f"warm/{tag}/{i}", data)
        puts, gets = [], []
        for i in range(n):
            t = time.perf_counter()
            await store.put(f"{tag}/{i}", data)
            puts.append(time.perf_counter() - t)
        for i in range(n):
            t = time.perf_counter()
            await store.get(f"{tag}/{i}", 1000, 1000 + 4096)
            gets.append(time.perf_counter() - t)
    return puts, gets


async def bench_aiobotocore(endpoint: str, bucket: str, n: int, tag: str) -> tuple[list[float], list[float]]:
    from aiobotocore.session import get_session

    data = os.urandom(SIZE)
    session = get_session()
    async with session.create_client(
        "s3", endpoint_url=endpoint, region_name="us-east-1",
        aws_access_key_id="bench", aws_secret_access_key="bench",
    ) as client:
        for i in range(20):
            await client.put_object(Bucket=bucket, Key=f"warm/{tag}/{i}", Body=data)
        puts, gets = [], []
        for i in range(n):
            t = time.perf_counter()
            await client.put_object(Bucket=bucket, Key=f"{tag}/{i}", Body=data, IfNoneMatch="*")
            puts.append(time.perf_counter() - t)
        for i in range(n):
            t = time.perf_counter()
            answer = await client.get_object(Bucket=bucket, Key=f"{tag}/{i}", Range="bytes=1000-5095")
            await answer["Body"].read()
            gets.append(time.perf_counter() - t)
    return puts, gets


async def get_rate(url: str, n: int, at_once: list[int], sizes: list[int], tag: str) -> None:
    async with open_object_store(url) as store:
        data = os.urandom(max(sizes))
        for i in range(n):
            await store.put(f"rate/{tag}/{i}", data)
        for size in sizes:
            for k in at_once:
                slots = asyncio.Semaphore(k)

                async def one(i: int) -> None:
                    async with slots:
                        await store.get(f"rate/{tag}/{i}", 0, size)

                t = time.perf_counter()
                await asyncio.gather(*(one(i) for i in range(n)))
                print(f"ranged GETs of {size:,} bytes, {k} at once: {n / (time.perf_counter() - t):,.0f} a second "
                      f"({n} objects)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--gets-at-once", metavar="N[,N...]",
                        help="measure the ranged-GET rate with N GETs under way (see the docstring)")
    parser.add_argument("--get-sizes", default="130,20000", metavar="BYTES[,...]")
    args = parser.parse_args()
    if args.gets_at_once:
        with tempfile.TemporaryDirectory() as work, SeaweedServer(work, bucket="bench") as server:
            for round_ in range(args.rounds):
                asyncio.run(get_rate(server.store_url(), args.requests,
                                     [int(k) for k in args.gets_at_once.split(",")],
                                     [int(b) for b in args.get_sizes.split(",")], str(round_)))
        return
    try:
        import aiobotocore  # noqa: F401
        clients = ["obstore", "aiobotocore"]
    except ImportError:
        clients = ["obstore"]
        print("aiobotocore is not importable: measuring obstore only")
    results: dict[str, tuple[list[float], list[float]]] = {c: ([], []) for c in clients}
    with tempfile.TemporaryDirectory() as work, SeaweedServer(work, bucket="bench") as server:
        for round_ in range(args.rounds):
            for client in clients:
                tag = f"{client}-{round_}"
                if client == "obstore":
                    puts, gets = asyncio.run(bench_obstore(server.store_url(), args.requests, tag))
                else:
                    puts, gets = asyncio.run(bench_aiobotocore(server.endpoint, "bench", args.requests, tag))
                results[client][0].extend(puts)
                results[client][1].extend(gets)
    for client, (puts, gets) in results.items():
        print(f"{client:12} 64 KiB PUT p50 {_pct(puts, .5):6.2f} ms p99 {_pct(puts, .99):6.2f} ms | "
              f"4 KiB ranged GET p50 {_pct(gets, .5):6.2f} ms p99 {_pct(gets, .99):6.2f} ms  ({len(puts)} each)")


if __name__ == "__main__":
    main()

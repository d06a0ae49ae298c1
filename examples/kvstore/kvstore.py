"""A sharded key-value store whose shards use Magnetar topics as write-ahead logs.

The worked example of conditional publish (Kafka's KIP-27): every shard has
a log topic, ``<prefix><shard>``. A shard's leader turns writes into
conditional sends that expect the log's upcoming offset, so a leader whose
view is stale (another leader wrote meanwhile) is refused instead of
corrupting the log; followers tail the log and serve reads.

    python examples/kvstore/kvstore.py serve --shard 0 --role leader --port 7000
    python examples/kvstore/kvstore.py serve --shard 0 --role follower --port 7001
    python examples/kvstore/kvstore.py load --server 0=127.0.0.1:7000 --ops 10000

``serve`` prints ``READY shard=N role=R port=P offset=O`` once it has
caught up with the log and listens; on SIGTERM/SIGINT it finishes the
write in flight, catches up with the log, writes ``--state-file`` (JSON:
values, next_offset, writes, refusals, stale_writes) and exits 0. ``load``
prints a ``DONE ...`` summary line and writes every attempt's outcome to
``--out``. See README.md.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from magnetar.client import AsyncClient  # noqa: E402

from driver import run_load  # noqa: E402
from leader import Leader  # noqa: E402
from server import ShardServer  # noqa: E402
from shard import LogTail, ShardState  # noqa: E402


async def serve(args: argparse.Namespace) -> None:
    client = AsyncClient(args.service_url, operation_timeout_seconds=30, backoff_max_seconds=2)
    topic = f"{args.topic_prefix}{args.shard}"
    state = ShardState()
    tail = LogTail(client, topic, state)
    await tail.start()
    leader: Leader | None = None
    follower: asyncio.Task | None = None
    if args.role == "leader":
        leader = Leader(client, topic, state, tail, max_batch=args.max_batch)
        await leader.start()
    else:
        await tail.catch_up()
        follower = asyncio.get_running_loop().create_task(tail.follow())
    server = ShardServer(args.id or f"{args.role}-{uuid.uuid4().hex[:6]}", state, leader)
    port = await server.start(args.host, args.port)
    print(f"READY shard={args.shard} role={args.role} port={port} offset={state.next_offset}", flush=True)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()

    if leader is not None:
        await leader.stop()
    if follower is not None:
        follower.cancel()
        await asyncio.gather(follower, return_exceptions=True)
        await tail.catch_up()
    await server.close()
    if args.state_file:
        doc = {"values": state.values, "next_offset": state.next_offset, "stale_writes": state.stale_writes,
               "writes": leader.writes if leader else 0, "refusals": leader.refusals if leader else 0}
        tmp = args.state_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, args.state_file)
    await tail.close()
    await client.close()


def _server_arg(text: str) -> tuple[int, str, int]:
    shard, _, address = text.partition("=")
    host, _, port = address.rpartition(":")
    if not (shard.isdigit() and host and port.isdigit()):
        raise argparse.ArgumentTypeError(f"expected SHARD=HOST:PORT, got {text!r}")
    return int(shard), host, int(port)


async def load(args: argparse.Namespace) -> None:
    servers: dict[int, list[tuple[str, int]]] = {}
    for shard, host, port in args.server:
        servers.setdefault(shard, []).append((host, port))
    shards = args.shards or (max(servers) + 1)
    results = await run_load(servers, shards=shards, ops=args.ops, keys=args.keys, concurrency=args.concurrency,
                             retries=args.retries, seed=args.seed, name=args.name)
    if args.out:
        Path(args.out).write_text(results.to_json())
    print(results.summary(), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)

    s = commands.add_parser("serve", help="run a shard server (leader or follower)")
    s.add_argument("--shard", type=int, required=True)
    s.add_argument("--role", choices=["leader", "follower"], default="leader")
    s.add_argument("--service-url", default="pulsar://localhost:6650")
    s.add_argument("--topic-prefix", default="kvstore-shard-")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=0, help="0 picks a free port (printed in the READY line)")
    s.add_argument("--max-batch", type=int, default=100, help="most writes in one conditional batch")
    s.add_argument("--state-file", default=None)
    s.add_argument("--id", default=None, help="names this server's records when clients give no request name")

    d = commands.add_parser("load", help="drive increments against the shard servers")
    d.add_argument("--server", type=_server_arg, action="append", required=True, metavar="SHARD=HOST:PORT")
    d.add_argument("--shards", type=int, default=0, help="number of shards (default: highest given + 1)")
    d.add_argument("--ops", type=int, default=1000)
    d.add_argument("--keys", type=int, default=16)
    d.add_argument("--concurrency", type=int, default=8)
    d.add_argument("--retries", type=int, default=0, help="retry a refused write this many times")
    d.add_argument("--seed", type=int, default=None)
    d.add_argument("--name", default="driver", help="prefix of request names")
    d.add_argument("--out", default=None, help="write every attempt's outcome here (JSON)")

    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(serve(args) if args.command == "serve" else load(args))


if __name__ == "__main__":
    main()

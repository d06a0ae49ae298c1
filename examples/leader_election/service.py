"""A replicated counter service that elects its leader with an exclusive producer.

The use case of PIP-68. Every instance runs this program. An instance asks for
a WaitForExclusive producer on the service's log topic: the broker grants it
to one instance at a time, in arrival order. Until then the instance is a
follower: it tails the log with a reader and applies every update to its
state. Once its producer is ready it is the leader:

1. it bootstraps: reads the log to its end, so its state holds every update
   any earlier leader wrote (nobody else can write now);
2. it serves: each update is first appended to the log (its write-ahead log)
   and applied only once the broker has stored it.

If the leader dies, its connection drops and the broker promotes the next
waiting instance. A leader that lost its access (a newer leader fenced it)
can no longer append: its sends fail, and it exits rather than apply an
update the log does not hold.

Run three of these against `make standalone`:

    python examples/leader_election/service.py --id a
    python examples/leader_election/service.py --id b
    python examples/leader_election/service.py --id c

Each update message is ``<instance>:<incarnation>:<n>:<key>``; the state is
a count per key. SIGTERM makes an instance catch up with the log, write its
state to ``--state-file`` and exit.
"""
from __future__ import annotations

import signal
import threading

# Installed before anything slow is imported: a SIGTERM that arrives while
# the process starts must still mean "catch up, save the state, exit 0".
_stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: _stop.set())

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402

import pulsar  # noqa: E402

KEYS = ["apples", "pears", "plums", "figs"]


class Counter:
    """The replicated state: how many times each key was incremented."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.applied = 0

    def apply(self, update: bytes) -> None:
        key = update.decode().rsplit(":", 1)[1]
        self.counts[key] = self.counts.get(key, 0) + 1
        self.applied += 1


def catch_up(reader, state: Counter) -> None:
    """Apply everything in the log that this reader has not yet seen."""
    while reader.has_message_available():
        state.apply(reader.read_next(10_000).data())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--id", required=True)
    parser.add_argument("--service-url", default="pulsar://localhost:6650")
    parser.add_argument("--topic", default="leader-election-log")
    parser.add_argument("--state-file", default=None)
    parser.add_argument("--interval", type=float, default=0.002, help="seconds between updates as leader")
    args = parser.parse_args()
    incarnation = uuid.uuid4().hex[:8]
    stop = _stop

    client = pulsar.Client(args.service_url, operation_timeout_seconds=30)
    state = Counter()
    reader = client.create_reader(args.topic, pulsar.MessageId.earliest)
    print(f"FOLLOWER {args.id} {incarnation}", flush=True)
    promoted: list = []

    def ask_for_leadership() -> None:
        try:
            promoted.append(client.create_producer(
                args.topic, producer_name=f"{args.id}-{incarnation}",
                access_mode=pulsar.ProducerAccessMode.WaitForExclusive, send_timeout_millis=10_000,
            ))
        except Exception as exc:  # the client is closing
            promoted.append(exc)

    asker = threading.Thread(target=ask_for_leadership, daemon=True)
    asker.start()
    # Follower: tail the log until we are promoted (or told to stop).
    while not promoted and not stop.is_set():
        catch_up(reader, state)
        time.sleep(0.05)

    if promoted and not isinstance(promoted[0], Exception) and not stop.is_set():
        producer = promoted[0]
        catch_up(reader, state)  # bootstrap: the log is ours alone now
        print(f"LEADER {args.id} {incarnation} {state.applied}", flush=True)
        n = 0
        while not stop.is_set():
            update = f"{args.id}:{incarnation}:{n}:{random.choice(KEYS)}".encode()
            try:
                producer.send(update)
            except Exception as exc:
                print(f"FENCED {args.id} {incarnation}: {exc}", flush=True)
                break
            state.apply(update)  # applied only once the log holds it
            # Keep the reader past our own writes so a final catch-up is exact.
            reader.read_next(10_000)
            n += 1
            time.sleep(args.interval)

    catch_up(reader, state)
    if args.state_file:
        with open(args.state_file + ".tmp", "w") as f:
            json.dump({"counts": state.counts, "applied": state.applied}, f)
        os.replace(args.state_file + ".tmp", args.state_file)
    client.close()
    # A follower's request for the producer is still pending in the client's
    # C++ core; closing the client fails it. Exit only once that thread is out
    # of the client: interpreter shutdown with a thread inside it aborts the
    # process (SIGABRT) instead of exiting 0.
    asker.join(30)
    sys.exit(0)


if __name__ == "__main__":
    main()

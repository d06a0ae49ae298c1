"""The live-socket fuzzer (magnetar-chaos fuzz) against a real broker and a
real cluster: damaged frames from many connections while canary clients work."""
from __future__ import annotations

import random
import re

from typer.testing import CliRunner

from magnetar_chaos.cli import chaos_app as app
from magnetar_chaos.fuzz import conversation, mutate
from magnetar.protocol.frames import decode_frame


def test_the_conversation_is_well_formed_and_mutations_damage_it():
    frames = conversation("persistent://public/default/t")
    for frame in frames:  # every frame decodes before it is damaged
        decode_frame(memoryview(frame)[4:])
    rng = random.Random(3)  # both kinds: framing damage and hostile fields
    damaged = [mutate(f, rng) for f in frames for _ in range(20)]
    assert sum(d != f for d, f in zip(damaged, [f for f in frames for _ in range(20)])) > 0.9 * len(damaged)


def test_a_broker_survives_damaged_frames_and_keeps_serving(tmp_path):
    result = CliRunner().invoke(app, ["fuzz", "--rounds", "200", "--seed", "5", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "the broker survived" in result.output
    log = (tmp_path / "seed-5" / "broker.log").read_text()
    assert "Traceback" not in log, log[-3000:]


def test_a_cluster_broker_survives_damaged_frames_and_both_canaries_keep_working(tmp_path):
    """Three brokers on etcd; broker 1 (seed 4 % 3) is fuzzed with topics it
    owns and topics the others own (redirected lookups, refused producers);
    a canary on it and one on broker 2 must get all they send, every broker
    must live and answer."""
    result = CliRunner().invoke(app, ["fuzz", "--topology", "cluster", "--rounds", "120", "--seed", "4",
                                      "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "fuzzing broker-1 of 3" in result.output and "the cluster survived" in result.output
    # Four bundles spread over three brokers: the fuzzed one owns some, the others the rest.
    owned = re.search(r"(\d) of 8 fuzzed topics owned by the fuzzed broker", " ".join(result.output.split()))
    assert owned is not None and 1 <= int(owned.group(1)) <= 4, result.output
    for k in range(3):
        log = (tmp_path / "seed-4" / "cluster" / f"broker-{k}.log").read_text()
        assert "Traceback" not in log, log[-3000:]


def test_fuzz_against_several_brokers_says_it_wants_one(tmp_path):
    result = CliRunner().invoke(app, ["fuzz", "--service-url", "pulsar://a:6650,b:6650", "--rounds", "1",
                                      "--out", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert "names 2 brokers" in result.output and "one host" in result.output

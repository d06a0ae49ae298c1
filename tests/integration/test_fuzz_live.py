"""The live-socket fuzzer (magnetar chaos fuzz) against a real broker: damaged
frames from many connections while a canary client works."""
from __future__ import annotations

import random

from typer.testing import CliRunner

from magnetar.chaos.fuzz import conversation, mutate
from magnetar.cli import app
from magnetar.protocol.frames import decode_frame


def test_the_conversation_is_well_formed_and_mutations_damage_it():
    frames = conversation("persistent://public/default/t")
    for frame in frames:  # every frame decodes before it is damaged
        decode_frame(memoryview(frame)[4:])
    rng = random.Random(3)  # both kinds: framing damage and hostile fields
    damaged = [mutate(f, rng) for f in frames for _ in range(20)]
    assert sum(d != f for d, f in zip(damaged, [f for f in frames for _ in range(20)])) > 0.9 * len(damaged)


def test_a_broker_survives_damaged_frames_and_keeps_serving(tmp_path):
    result = CliRunner().invoke(app, ["chaos", "fuzz", "--rounds", "200", "--seed", "5", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "the broker survived" in result.output
    log = (tmp_path / "seed-5" / "broker.log").read_text()
    assert "Traceback" not in log, log[-3000:]

"""A new chaos fault is one entry in magnetar_chaos/faults.py: registered
there, the topology takes it, the runner injects it and ``--faults`` lists
it, with nothing else edited."""
from __future__ import annotations

import random

import pytest

from magnetar_chaos import faults
from magnetar_chaos.cli import run_command
from magnetar_chaos.runner import SYSTEMS


@pytest.fixture
def a_new_fault():
    hits = []

    @faults.fault("test-nudge", (faults.STANDALONE,), "a test's own fault")
    def nudge(system, rng: random.Random) -> str:
        hits.append(system)
        return f"nudged {rng.random() < 2}"

    yield hits
    del faults.FAULTS["test-nudge"]


def test_a_registered_fault_is_taken_injected_and_listed(a_new_fault):
    assert "test-nudge" in faults.faults_of("standalone")
    assert "test-nudge" not in faults.faults_of("cluster")
    system = object()
    assert faults.inject(system, "test-nudge", random.Random(1)) == "nudged True"
    assert a_new_fault == [system]
    assert "test-nudge (a test's own fault)" in faults.faults_help()


def test_the_systems_and_the_cli_read_the_registry():
    for topology, system in SYSTEMS.items():
        assert tuple(system.faults) == faults.faults_of(topology), topology
    help_text = next(p.default.help for p in __import__("inspect").signature(run_command).parameters.values()
                     if p.name == "faults")
    assert help_text == faults.faults_help()
    for entry in faults.FAULTS.values():
        assert f"{entry.name} ({entry.help})" in help_text


def test_a_built_in_fault_goes_to_its_system():
    class System:
        def inject(self, kind, rng):
            return f"{kind} done"

    assert faults.inject(System(), "kill", random.Random(0)) == "kill done"
    with pytest.raises(ValueError, match="registered twice"):
        faults.register("kill", (faults.STANDALONE,), "again")

"""The latency plot of a history: dots for receipts, bands for faults, ticks for sends never answered."""
from __future__ import annotations

from magnetar_chaos.history import History
from magnetar_chaos.plot import latencies, write_svg


def test_latencies_pair_invokes_with_outcomes_and_faults_with_heals(tmp_path):
    h = History()
    h.add("p", "invoke", "send", topic="t", value="p:0")
    h.add("p", "ok", "send", topic="t", value="p:0")
    h.add("nemesis", "info", "fault", value="kill")
    h.add("p", "invoke", "send", topic="t", value="p:1")
    h.add("nemesis", "info", "heal", value="kill broker")
    h.add("p", "info", "send", topic="t", value="p:1", error="Timeout")
    h.add("q", "invoke", "send", topic="t", value="q:0")  # the run ended before its answer
    acked, unanswered, faults = latencies(h.ops)
    assert [(p, round(lat, 3) >= 0) for p, _, lat in acked] == [("p", True)]
    assert sorted(p for p, _ in unanswered) == ["p", "q"]
    assert [kind for kind, _, _ in faults] == ["kill"] and faults[0][1] <= faults[0][2]
    svg = write_svg(h.ops, tmp_path / "latency.svg").read_text()
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert ">kill<" in svg and svg.count("<circle") == 1 and "&#9679; q" in svg

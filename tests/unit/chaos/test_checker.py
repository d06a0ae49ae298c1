"""The checker finds each anomaly it claims to find: histories with one
planted anomaly each, and a clean one that must stay clean."""
from __future__ import annotations

import json

import pytest

from magnetar_chaos.checker import check
from magnetar_chaos.history import History, read_history

T = "persistent://chaos/t/log"


def _send(h: History, process: str, seq: int, outcome: str = "ok", promise: str = "once", **extra) -> str:
    value = f"{process}:{seq}"
    h.add(process, "invoke", "send", topic=T, value=value, seq=seq, promise=promise, **extra)
    h.add(process, outcome, "send", topic=T, value=value)
    return value


def _read(h: History, values: list[str]) -> None:
    h.add("final", "ok", "read", topic=T, log=[[i, v] for i, v in enumerate(values)])


def _clean() -> tuple[History, list[str]]:
    h = History()
    values = [_send(h, "p", i) for i in range(5)]
    return h, values


def test_a_clean_history_is_clean():
    h, values = _clean()
    h.add("nemesis", "info", "fault", value="kill")
    _read(h, values)
    report = check(h.ops)
    assert report.clean, report.as_dict()
    assert report.acknowledged == 5 and report.faults["kill"] == 1


def test_an_acknowledged_value_missing_from_the_log_is_lost():
    h, values = _clean()
    _read(h, values[:2] + values[3:])
    report = check(h.ops)
    assert report.lost == 1 and not report.clean
    assert "p:2" in report.examples["lost"][0]


def test_an_unacknowledged_value_may_be_missing_or_present():
    h, values = _clean()
    maybe = _send(h, "p", 5, outcome="info")
    _read(h, values)
    assert check(h.ops).clean
    h2, values2 = _clean()
    maybe2 = _send(h2, "p", 5, outcome="info")
    _read(h2, values2 + [maybe2])
    assert check(h2.ops).clean and maybe == maybe2


def test_a_value_stored_twice_is_a_duplicate_only_where_once_was_promised():
    h, values = _clean()
    _read(h, values + [values[4]])
    assert check(h.ops).duplicated == 1
    h2 = History()
    loose = [_send(h2, "q", i, promise="at-least-once") for i in range(3)]
    _read(h2, loose + [loose[0]])
    assert check(h2.ops).clean


def test_a_producer_stored_out_of_order_is_reordered():
    h, values = _clean()
    _read(h, [values[0], values[2], values[1], values[3], values[4]])
    report = check(h.ops)
    assert report.reordered == 1 and report.reordered_by_process["p"] == 1


def test_an_exclusive_writer_that_writes_after_its_successor_is_interleaved():
    h = History()
    a = [_send(h, "w", i, exclusive=True, session="A") for i in range(2)]
    b = [_send(h, "w", i + 2, exclusive=True, session="B") for i in range(2)]
    _read(h, a + b)
    assert check(h.ops).clean
    _read(h, [a[0], b[0], a[1], b[1]])
    assert check(h.ops).interleaved_writers == 2  # A came back after B, then B after A


def test_a_conditional_send_acknowledged_elsewhere_than_its_offset_is_a_violation():
    h = History()
    first = _send(h, "c", 0, expected_offset=0)
    second = _send(h, "c", 1, expected_offset=1)
    _read(h, [first, second])
    assert check(h.ops).clean
    h.ops[-1]["log"] = [[0, first], [1, "other:0"], [2, second]]
    assert check(h.ops).offset_violations == 1


def test_a_refused_send_that_was_stored_is_a_phantom():
    h, values = _clean()
    refused = _send(h, "p", 5, outcome="fail")
    _read(h, values + [refused])
    assert check(h.ops).phantoms == 1


def test_a_topic_with_acknowledged_sends_and_no_final_read_is_not_clean():
    h, _ = _clean()
    report = check(h.ops)
    assert report.unread_topics == 1 and not report.clean


def test_a_history_file_round_trips_and_bad_lines_are_named(tmp_path):
    path = tmp_path / "h.jsonl"
    h = History(path)
    _send(h, "p", 0)
    _read(h, ["p:0"])
    h.close()
    assert check(read_history(path)).clean
    path.write_text(path.read_text() + "{not json\n")
    with pytest.raises(ValueError, match=r"h.jsonl:4"):
        read_history(path)
    path.write_text(json.dumps({"type": "ok"}) + "\n")
    with pytest.raises(ValueError, match="needs process"):
        read_history(path)


def test_chaos_check_exits_1_on_an_anomaly_and_0_on_a_clean_history(tmp_path):
    from typer.testing import CliRunner

    from magnetar_chaos.cli import chaos_app as app

    clean, lossy = tmp_path / "clean.jsonl", tmp_path / "lossy.jsonl"
    for path, stored in ((clean, ["p:0", "p:1"]), (lossy, ["p:0"])):
        h = History(path)
        _send(h, "p", 0)
        _send(h, "p", 1)
        _read(h, stored)
        h.close()
    runner = CliRunner()
    ok = runner.invoke(app, ["check", str(clean)])
    assert ok.exit_code == 0 and "no anomaly" in ok.output
    bad = runner.invoke(app, ["check", str(lossy)])
    assert bad.exit_code == 1 and "lost" in bad.output and "p:1" in bad.output
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text("nope\n")
    assert runner.invoke(app, ["check", str(garbage)]).exit_code == 2
    assert runner.invoke(app, ["run", "--faults", "meteor", "--duration", "1",
                               "--out", str(tmp_path / "o")]).exit_code == 2
    # etcd faults need a cluster; an unknown topology is refused too.
    assert runner.invoke(app, ["run", "--faults", "kill-etcd", "--duration", "1",
                               "--out", str(tmp_path / "o")]).exit_code == 2
    assert runner.invoke(app, ["run", "--topology", "moon", "--duration", "1",
                               "--out", str(tmp_path / "o")]).exit_code == 2


def test_an_acknowledged_send_a_consumer_never_got_is_missed_and_repeats_are_counted():
    h, values = _clean()
    _read(h, values)
    for v in values[:4] + [values[0]]:
        h.add("consumer", "ok", "receive", topic=T, value=v, redelivery=0)
    report = check(h.ops)
    assert report.missed_by_consumers == 1 and "p:4" in report.examples["missed_by_consumers"][0]
    assert report.redelivered == 1 and report.received == 5
    h.add("consumer", "ok", "receive", topic=T, value=values[4], redelivery=0)
    report = check(h.ops)
    assert report.clean and report.redelivered == 1


def test_a_refusal_during_a_fault_is_unknown_not_a_phantom():
    h, values = _clean()
    value = "p:5"
    h.add("p", "invoke", "send", topic=T, value=value, seq=5, promise="once")
    h.add("nemesis", "info", "fault", value="kill")
    h.add("p", "fail", "send", topic=T, value=value, error="ProducerFenced")
    h.add("nemesis", "info", "heal", value="kill")
    _read(h, values + [value])
    assert check(h.ops).phantoms == 0


def _receive(h: History, value: str, subscription: str, order: str | None) -> None:
    h.add(subscription, "ok", "receive", topic=T, value=value, redelivery=0, subscription=subscription, order=order)


def test_an_ordered_subscription_that_gets_a_message_ahead_of_its_turn_is_out_of_order():
    h, values = _clean()
    _read(h, values)
    for v in [values[0], values[1], values[0], values[2], values[3], values[4]]:  # a repeat is fine
        _receive(h, v, "failover", "per-producer")
    assert check(h.ops).clean
    h2, values = _clean()
    _read(h2, values)
    for v in [values[0], values[2], values[1], values[3], values[4]]:
        _receive(h2, v, "failover", "per-producer")
    report = check(h2.ops)
    assert report.delivered_out_of_order == 1 and "p #1" in report.examples["delivered_out_of_order"][0]
    # A Shared subscription promises no order: the same receipts are fine there.
    h3, values = _clean()
    _read(h3, values)
    for v in [values[0], values[2], values[1], values[3], values[4]]:
        _receive(h3, v, "shared", None)
    assert check(h3.ops).clean


def test_a_reader_that_skips_an_entry_of_the_log_is_out_of_order_and_misses_it():
    h, values = _clean()
    _read(h, values + [values[1]])  # a stored repeat: the reader reads the distinct values in order
    for v in values:
        _receive(h, v, "reader", "log")
    report = check(h.ops)
    assert report.delivered_out_of_order == 0 and report.missed_by_consumers == 0
    h2, values = _clean()
    _read(h2, values)
    for v in [values[0], values[2], values[3], values[4]]:
        _receive(h2, v, "reader", "log")
    report = check(h2.ops)
    assert report.delivered_out_of_order == 1 and report.missed_by_consumers == 1
    assert "entry 1 was next" in report.examples["delivered_out_of_order"][0]


def test_each_subscription_must_get_every_acknowledged_send():
    h, values = _clean()
    _read(h, values)
    for v in values:
        _receive(h, v, "shared", None)
    for v in values[:4]:
        _receive(h, v, "failover", "per-producer")
    report = check(h.ops)
    assert report.missed_by_consumers == 1 and "(failover)" in report.examples["missed_by_consumers"][0]


def test_a_refusal_in_a_faults_aftermath_is_unknown_but_not_after_it():
    def history(aftermath: float) -> History:
        h, values = _clean()
        h.add("nemesis", "info", "fault", value="kill-etcd")
        h.add("nemesis", "info", "heal", value="kill-etcd", aftermath=aftermath)
        value = "p:5"
        h.add("p", "invoke", "send", topic=T, value=value, seq=5, promise="once")
        h.add("p", "fail", "send", topic=T, value=value, error="ProducerFenced")
        _read(h, values + [value])
        return h

    assert check(history(aftermath=5.0).ops).phantoms == 0  # sessions still lapsing after the heal
    assert check(history(aftermath=0.0).ops).phantoms == 1


def _ask_next_offset(h: History, answer: int, probe: str = "offsets") -> None:
    h.add(probe, "invoke", "next-offset", topic=T)
    h.add(probe, "ok", "next-offset", topic=T, next_offset=answer)


def test_a_next_offset_older_than_a_receipt_given_before_it_was_asked_is_a_stale_read():
    h, values = _clean()  # p:0..p:4 acknowledged, stored at offsets 0..4
    _ask_next_offset(h, 5)
    _ask_next_offset(h, 3)  # a zombie's answer: p:3 and p:4 were acknowledged before the question
    _read(h, values)
    report = check(h.ops)
    assert report.offset_reads == 2 and report.stale_reads == 1 and not report.clean
    assert "next offset 3" in report.examples["stale_reads"][0] and "p:4" in report.examples["stale_reads"][0]


def test_a_receipt_given_while_the_read_was_in_flight_does_not_make_it_stale():
    h = History()
    first = _send(h, "p", 0)
    h.add("offsets", "invoke", "next-offset", topic=T)
    second = _send(h, "p", 1)  # acknowledged after the question: the answer may or may not count it
    h.add("offsets", "ok", "next-offset", topic=T, next_offset=1)
    _ask_next_offset(h, 2)
    _read(h, [first, second])
    report = check(h.ops)
    assert report.offset_reads == 2 and report.clean, report.as_dict()


def test_a_send_made_in_another_region_does_not_count_against_the_reads():
    h, values = _clean()
    elsewhere = _send(h, "remote", 0, region="region-b")  # reaches this region's log later, by replication
    _ask_next_offset(h, 5)
    _read(h, values + [elsewhere])
    report = check(h.ops)
    assert report.stale_reads == 0 and report.clean, report.as_dict()
    h2, values2 = _clean()
    here = _send(h2, "local", 0)
    _ask_next_offset(h2, 5)
    _read(h2, values2 + [here])
    assert check(h2.ops).stale_reads == 1


def test_overlapping_faults_each_end_at_their_own_nemesiss_heal():
    """Two nemeses: the second heals first. Its heal must not close the
    first's fault (a refusal during the first stays unknown), nor leave the
    first open for ever (a refusal after both heals is a phantom)."""
    def history(refused_after_both: bool) -> History:
        h, values = _clean()
        h.add("nemesis-0", "info", "fault", value="broker-host-lost")
        h.add("nemesis-1", "info", "fault", value="client-cut")
        h.add("nemesis-1", "info", "heal", value="client-cut")
        if refused_after_both:
            h.add("nemesis-0", "info", "heal", value="broker-host-lost")
        value = "p:5"
        h.add("p", "invoke", "send", topic=T, value=value, seq=5, promise="once")
        h.add("p", "fail", "send", topic=T, value=value, error="ProducerFenced")
        if not refused_after_both:
            h.add("nemesis-0", "info", "heal", value="broker-host-lost")
        _read(h, values + [value])
        return h

    assert check(history(refused_after_both=False).ops).phantoms == 0
    report = check(history(refused_after_both=True).ops)
    assert report.phantoms == 1 and report.faults == {"broker-host-lost": 1, "client-cut": 1}

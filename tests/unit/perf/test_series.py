"""The sending's series by send time (magnetar/perf/series.py): slots and
samples land in the bucket their time falls in, percentiles are exact."""
from magnetar.perf.reporting import Reporter
from magnetar.perf.series import SLOT_S, SeriesLog, buckets


def test_buckets_by_send_time_with_exact_percentiles():
    log = SeriesLog()
    t0 = 1000.0
    log.add_sent(10, t0 + 0.05)   # bucket 0
    log.add_sent(5, t0 + 0.49)    # bucket 0 (slot starts at 0.4)
    log.add_sent(7, t0 + 0.5)     # bucket 1
    log.add_sent(99, t0 - 0.2)    # before the start: left out
    log.add_acked(12, t0 + 1.2)   # bucket 2, by the receipt's time
    for i in range(100):          # bucket 0: 1..100 ms
        log.add_sample(t0 + 0.001 * i, (i + 1) * 1000)
    log.add_sample(t0 + 1.0, 250_000)  # bucket 2, sent then, whenever it was answered
    out = buckets(log, t0, 0.5)
    assert [b["t"] for b in out] == [0.0, 0.5, 1.0]
    assert [b["sent"] for b in out] == [15, 7, 0]
    assert [b["acked"] for b in out] == [0, 0, 12]
    assert out[0]["samples"] == 100 and (out[0]["p50_ms"], out[0]["p99_ms"], out[0]["max_ms"]) == (50.0, 99.0, 100.0)
    assert out[1]["samples"] == 0 and out[1]["p99_ms"] is None
    assert out[2]["p99_ms"] == 250.0
    assert (out[0]["over_50"], out[0]["over_100"], out[2]["over_100"]) == (50, 0, 1)
    # Answered when the receipt came: 0.1 s..0.199 s after 1000.0 (bucket 0); 1.25 s (bucket 2).
    assert [b["answered"] for b in out] == [100, 0, 1]


def test_empty_buckets_reach_the_end_given():
    log = SeriesLog()
    log.add_sent(1, 10.0)
    assert len(buckets(log, 10.0, 0.5, end=12.0)) == 4
    assert len(buckets(log, 10.0, 0.5, end=12.1)) == 5


def test_a_reporter_ships_its_series_as_deltas_and_the_runner_adds_them_up():
    class Queue(list):
        put = list.append
    q = Queue()
    reporter = Reporter(q, 0, "produce", series=True)
    reporter.sent(4, 5.0)
    reporter.add(4, 400, now=5.05)
    reporter.latency_us(3000, sent_at=5.0)
    reporter.final()
    reporter.sent(2, 5.0 + SLOT_S)
    reporter.final()
    total = SeriesLog()
    for report in q:
        total.absorb(report["series"])
    assert total.sent == {50: 4, 51: 2} and total.acked == {50: 4} and total.samples == [(5.0, 3000)]
    plain = Reporter(q, 1, "produce")
    plain.sent(4, 5.0)
    plain.final()
    assert q[-1]["series"] is None

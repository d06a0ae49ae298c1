"""bench/send_windows.py: a long sending's minutes beside the broker's
counters, loop lag, seals and compactions, on one clock."""
from __future__ import annotations

from bench import send_windows
from magnetar.perf.series import SeriesLog, buckets


def test_each_window_has_its_exact_latency_and_the_broker_s_rates_in_it():
    t0 = 100.0
    log = SeriesLog()
    for i in range(100):  # window 0: 1..100 ms; window 1: 1,001..1,100 ms
        log.add_sample(t0 + 1 + i * 0.5, (i + 1) * 1000)
        log.add_sample(t0 + 61 + i * 0.5, (i + 1001) * 1000)
    windows = buckets(log, t0, 60.0)
    samples = [(t0 + 1, {"puts": 0, "gets": 0, "rss": 1 << 20}), (t0 + 59, {"puts": 58, "gets": 0, "rss": 2 << 20}),
               (t0 + 61, {"puts": 60, "gets": 0, "rss": 3 << 20}), (t0 + 119, {"puts": 70, "gets": 290, "rss": 5 << 20})]
    lags = [(t0 + 30, 12.0), (t0 + 70, 400.0), (t0 + 80, 9.0)]
    events = [("seal", t0 + 65), ("seal", t0 + 66), ("compact", t0 + 90), ("seal", t0 - 5)]
    send_windows.annotate(windows, t0, 60.0, samples, lags, events)
    first, second = windows
    assert (first["p50_ms"], first["p99_ms"], first["max_ms"]) == (50.0, 99.0, 100.0)
    assert (second["p50_ms"], second["max_ms"]) == (1050.0, 1100.0)
    assert (first["puts_per_s"], second["puts_per_s"], second["gets_per_s"]) == (1.0, 0.2, 5.0)
    assert (first["rss_mb"], second["rss_mb"]) == (2, 5)
    assert (first["lag_ms"], second["lag_ms"]) == (12.0, 400.0)
    assert (first["seals"], second["seals"], second["compactions"]) == (0, 2, 1)
    lines = send_windows.table(windows)
    assert len(lines) == 3 and "1100.0" in lines[2]


def test_a_window_without_records_prints_dashes():
    windows = [{"t": 0.0, "sent": 0, "samples": 0, "p50_ms": None, "p99_ms": None, "max_ms": None}]
    send_windows.annotate(windows, 0.0, 60.0, samples=[])
    assert "puts_per_s" not in windows[0]
    assert " - " in send_windows.table(windows)[1]


def _two_windows(t0: float) -> list[dict]:
    """Two 60 s windows from ``t0``, one message sent and answered in 1 ms in each."""
    log = SeriesLog()
    for at in (t0 + 1, t0 + 61):
        log.add_sent(1, at)
        log.add_sample(at, 1000)
    return buckets(log, t0, 60.0)


class _Machine:
    """A Machine's readings as `between` gives them: a slower host in the second window."""

    def between(self, begin: float, end: float) -> dict:
        return {"broker": 60, "machine": 80, "steal": 0 if begin < 160 else 12, "host_us": 1500 if begin < 160 else 2000}


def test_each_window_has_the_host_s_speed_against_the_fastest_and_its_steal():
    t0 = 100.0
    windows = _two_windows(t0)
    send_windows.annotate(windows, t0, 60.0, machine=_Machine())
    assert [w["host"] for w in windows] == [100, 75]  # 1,500 µs a unit against 2,000: 75 % of the speed
    assert [w["steal"] for w in windows] == [0, 12]
    head, first, second = send_windows.table(windows)
    assert head.split()[-2:] == ["steal", "host"]
    assert second.split()[-2:] == ["12", "75"]


def test_a_window_without_host_readings_has_no_host_figure():
    windows = [{"t": 0.0, "sent": 1, "samples": 1, "p50_ms": 1.0, "p99_ms": 1.0, "max_ms": 1.0}]

    class NoProbe:
        def between(self, begin, end):
            return {"broker": 1, "machine": 1, "steal": 0, "host_us": None}
    send_windows.annotate(windows, 0.0, 60.0, machine=NoProbe())
    assert windows[0]["host"] is None and send_windows.table(windows)[1].split()[-1] == "-"


def test_the_host_s_reference_is_the_fastest_window_that_sent():
    # The drain after a sending (nothing sent) has an idle machine: not the reference.
    windows = [{"t": 0.0, "sent": 5, "samples": 1, "p50_ms": 1.0, "p99_ms": 1.0, "max_ms": 1.0},
               {"t": 60.0, "sent": 0, "samples": 0, "p50_ms": None, "p99_ms": None, "max_ms": None}]

    class Probe:
        def between(self, begin, end):
            return {"steal": 0, "host_us": 2000 if begin < 60 else 1000}
    send_windows.annotate(windows, 0.0, 60.0, machine=Probe())
    assert [w["host"] for w in windows] == [100, 200]


def test_each_window_has_etcd_s_mean_time_per_operation_its_cpu_and_snapshots():
    t0 = 100.0
    windows = _two_windows(t0)

    def sample(t, fsync_s, fsyncs, cpu, snaps):
        return (t, {"etcd_fsync_s": fsync_s, "etcd_fsync_n": fsyncs, "etcd_cpu": cpu, "etcd_snapshots": snaps,
                    "etcd_db": 3 << 20})

    samples = [sample(t0 + 1, 0.0, 0, 0.0, 0), sample(t0 + 51, 1.0, 1000, 10.0, 0),  # 1 ms a fsync, 20 % of a core
               sample(t0 + 61, 1.0, 1000, 10.0, 0), sample(t0 + 111, 5.0, 1500, 40.0, 1)]  # 8 ms, 60 %, a snapshot
    send_windows.annotate(windows, t0, 60.0, samples)
    first, second = windows
    assert (first["etcd_fsync_ms"], second["etcd_fsync_ms"]) == (1.0, 8.0)
    assert (first["etcd_cpu"], second["etcd_cpu"]) == (20, 60)
    assert (first["etcd_snapshots"], second["etcd_snapshots"], second["etcd_db_mb"]) == (0, 1, 3)
    assert "etcd_apply_ms" not in first  # no apply counted: no mean, printed "-"
    head, _, row = send_windows.table(windows)
    assert "fsync" in head and "8.00" in row

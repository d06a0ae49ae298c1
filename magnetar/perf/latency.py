"""Latency histograms that can cross process boundaries.

Values are recorded in microseconds in an HDR histogram (1 us .. 10 min,
3 significant digits: 0.1 % relative error). Workers record into their own
histogram and ship it to the runner as the ``encode()``-d delta since the
last report; the runner adds them up. Percentiles are reported in
milliseconds.

Failure modes: a value above the trackable maximum is clamped to it (an
HDR histogram raises or drops such values otherwise) so a single stuck
message shows up as "max = 10 min" rather than vanishing.
"""
from __future__ import annotations

from hdrh.histogram import HdrHistogram

LOWEST_US = 1
HIGHEST_US = 600_000_000
SIGNIFICANT_DIGITS = 3
PERCENTILES = (50.0, 95.0, 99.0, 99.9)
#: Points of the CDF written to JSON (enough for a smooth log-scale plot).
CDF_PERCENTILES = (0, 1, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 97.5, 99, 99.5, 99.9, 99.95, 99.99, 100)


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)


def record(hist: HdrHistogram, micros: int, count: int = 1) -> None:
    """Record ``count`` latencies of ``micros`` microseconds (negative clock
    skew counts as 0 -> 1 us)."""
    if micros < LOWEST_US:
        micros = LOWEST_US
    elif micros > HIGHEST_US:
        micros = HIGHEST_US
    hist.record_value(micros, count)


def encode(hist: HdrHistogram) -> bytes | None:
    """The histogram as compact bytes, or None if it is empty (saves IPC)."""
    if hist.get_total_count() == 0:
        return None
    return hist.encode()


def merge_encoded(into: HdrHistogram, blob: bytes | None) -> None:
    if blob:
        into.add(HdrHistogram.decode(blob))


def summary(hist: HdrHistogram) -> dict:
    """``{"count", "p50", "p95", "p99", "p99.9", "max", "mean"}`` in ms; zeros when empty."""
    count = hist.get_total_count()
    out: dict = {"count": count}
    for p in PERCENTILES:
        out[f"p{p:g}"] = round(hist.get_value_at_percentile(p) / 1000, 3) if count else 0.0
    out["max"] = round(hist.get_max_value() / 1000, 3) if count else 0.0
    out["mean"] = round(hist.get_mean_value() / 1000, 3) if count else 0.0
    return out


def cdf(hist: HdrHistogram) -> list[list[float]]:
    """``[[percentile, ms], ...]`` for plotting; empty when there are no samples."""
    if hist.get_total_count() == 0:
        return []
    return [[p, round(hist.get_value_at_percentile(p) / 1000, 4)] for p in CDF_PERCENTILES]

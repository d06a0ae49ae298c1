"""PNG plots of a bench run (matplotlib, Agg backend: no display needed).

- ``throughput.png``: grouped bars, one group per throughput row, one bar per system;
- ``cpu_per_message.png``: the same for every "server CPU per message" row;
- ``latency_cdf.png``: end-to-end latency CDFs per fixed rate, one line per system,
  x on a "nines" scale (90, 99, 99.9 ...), y in ms on a log scale.

Failure modes: without matplotlib (the ``bench`` extra), plotting is skipped
with a note, never an exception.
"""
from __future__ import annotations

import math
import textwrap
from pathlib import Path


def _nines(p: float) -> float:
    return -math.log10(max(1e-5, 1 - p / 100))


def plot(report: dict, out_dir: Path) -> list[Path]:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install -e '.[bench]'): no plots")
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    labels = report["systems"]
    written = []

    def grouped_bars(bars: list, ylabel: str, title: str, name: str) -> None:
        fig, ax = plt.subplots(figsize=(11, 5))
        width = 0.8 / len(labels)
        for i, label in enumerate(labels):
            vals = [(r["values"].get(label) or 0) for r in bars]
            ax.bar([x + i * width for x in range(len(bars))], vals, width, label=label)
        ax.set_xticks([x + width * (len(labels) - 1) / 2 for x in range(len(bars))])
        ax.set_xticklabels([textwrap.fill(f"{r['workload']}: {r['metric']}", 30) for r in bars], fontsize=7)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend()
        fig.tight_layout()
        path = out_dir / name
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    bars = [r for r in report["rows"] if r["unit"] == "msg/s" and "per broker core" not in r["metric"]
            and "achieved" not in r["metric"]]
    if bars:
        grouped_bars(bars, "msg/s", "Throughput (higher is better)", "throughput.png")
    cpu = [r for r in report["rows"] if r["metric"].startswith("server CPU per message")]
    if cpu:
        grouped_bars(cpu, "µs of server CPU per message", "Server CPU per message (lower is better)",
                     "cpu_per_message.png")

    cdfs = report.get("latency_cdfs", {})
    if cdfs:
        fig, axes = plt.subplots(1, len(cdfs), figsize=(6 * len(cdfs), 4.5), squeeze=False)
        ticks = [0, 50, 90, 99, 99.9, 99.99]
        for ax, (workload, per_system) in zip(axes[0], cdfs.items()):
            for label, points in per_system.items():
                if points:
                    ax.plot([_nines(p) for p, _ in points], [max(ms, 0.001) for _, ms in points], label=label)
            ax.set_xticks([_nines(t) for t in ticks])
            ax.set_xticklabels([f"{t:g}" for t in ticks])
            ax.set_yscale("log")
            ax.set_xlabel("percentile")
            ax.set_ylabel("end-to-end latency (ms)")
            ax.set_title(f"{workload} (lower is better)", fontsize=9)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend()
        fig.tight_layout()
        path = out_dir / "latency_cdf.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written

"""Latency over time with the faults marked: ``latency.svg`` beside a history.

Each acknowledged send is a dot at (when it was invoked, how long until its
receipt), one colour per process; each fault is a shaded band from its
injection to its heal, labelled with its kind. Past ``MAX_DOTS`` sends the
fast ones are sampled (every send slower than 50 ms is kept). Sends that never got a
receipt are ticks along the top. The y axis is logarithmic (1 ms to the
longest wait), since a healthy send takes milliseconds and one caught by a
fault seconds. Plain SVG, written by hand: no plotting library needed.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

WIDTH, HEIGHT = 1000, 420
LEFT, RIGHT, TOP, BOTTOM = 60, 20, 30, 40
#: Dots drawn at most (plus every send slower than 50 ms).
MAX_DOTS = 15_000
_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"]


def latencies(ops: list[dict[str, Any]]) -> tuple[list[tuple[str, float, float]], list[tuple[str, float]],
                                                  list[tuple[str, float, float]]]:
    """From a history: (process, invoked at, seconds to receipt) per
    acknowledged send, (process, invoked at) per send without a receipt, and
    (kind, start, end) per fault."""
    invoked: dict[tuple, dict] = {}
    acked, unanswered, faults = [], [], []
    open_fault: list | None = None
    end_time = 0.0
    for op in ops:
        end_time = max(end_time, op.get("time", 0.0))
        f, kind = op.get("f"), op.get("type")
        if f == "fault" and kind == "info":
            open_fault = [str(op.get("value")), op.get("time", 0.0)]
        elif f == "heal" and open_fault is not None:
            faults.append((open_fault[0], open_fault[1], op.get("time", 0.0)))
            open_fault = None
        elif f == "send":
            key = (op.get("topic"), op.get("value"))
            if kind == "invoke":
                invoked[key] = op
            elif key in invoked:
                start = invoked.pop(key)
                if kind == "ok":
                    acked.append((start["process"], start["time"], op["time"] - start["time"]))
                else:
                    unanswered.append((start["process"], start["time"]))
    unanswered += [(op["process"], op["time"]) for op in invoked.values()]
    if open_fault is not None:
        faults.append((open_fault[0], open_fault[1], end_time))
    return acked, unanswered, faults


def write_svg(ops: list[dict[str, Any]], path: Path) -> Path:
    """Draw the history's latencies to ``path`` (an SVG file); returns it."""
    acked, unanswered, faults = latencies(ops)
    if len(acked) > MAX_DOTS:  # keep every slow send and a sample of the fast ones (a readable file)
        keep = len(acked) // MAX_DOTS + 1
        acked = [a for i, a in enumerate(acked) if a[2] >= 0.05 or i % keep == 0]
    t_end = max([t for _, t, _ in acked] + [t for _, t in unanswered] + [e for _, _, e in faults] + [1.0])
    worst = max([lat for _, _, lat in acked] + [0.01])
    lo, hi = math.log10(0.001), math.log10(max(worst, 0.01) * 1.2)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(t: float) -> float:
        return LEFT + plot_w * t / t_end

    def y(seconds: float) -> float:
        v = (math.log10(max(seconds, 0.001)) - lo) / (hi - lo)
        return TOP + plot_h * (1 - min(max(v, 0.0), 1.0))

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'font-family="sans-serif" font-size="11">',
             f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>']
    for kind, start, end in faults:
        parts.append(f'<rect x="{x(start):.1f}" y="{TOP}" width="{max(x(end) - x(start), 1):.1f}" '
                     f'height="{plot_h}" fill="#f4cccc" opacity="0.6"/>')
        parts.append(f'<text x="{x(start) + 2:.1f}" y="{TOP - 4}" fill="#990000">{escape(kind)}</text>')
    processes = sorted({p for p, _, _ in acked} | {p for p, _ in unanswered})
    colour = {p: _COLOURS[i % len(_COLOURS)] for i, p in enumerate(processes)}
    for process, t, lat in acked:
        parts.append(f'<circle cx="{x(t):.1f}" cy="{y(lat):.1f}" r="1.2" fill="{colour[process]}"/>')
    for process, t in unanswered:
        parts.append(f'<line x1="{x(t):.1f}" y1="{TOP}" x2="{x(t):.1f}" y2="{TOP + 6}" stroke="{colour[process]}"/>')
    parts.append(f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{LEFT + plot_w}" y2="{TOP + plot_h}" stroke="black"/>')
    parts.append(f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}" stroke="black"/>')
    decade = 0.001
    while decade <= 10 ** hi:
        label = f"{decade * 1000:g} ms" if decade < 1 else f"{decade:g} s"
        parts.append(f'<text x="{LEFT - 4}" y="{y(decade) + 4:.1f}" text-anchor="end">{label}</text>')
        parts.append(f'<line x1="{LEFT}" y1="{y(decade):.1f}" x2="{LEFT + plot_w}" y2="{y(decade):.1f}" '
                     f'stroke="#dddddd"/>')
        decade *= 10
    step = max(1, round(t_end / 10))
    for t in range(0, int(t_end) + 1, step):
        parts.append(f'<text x="{x(t):.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">{t} s</text>')
    for i, process in enumerate(processes):
        parts.append(f'<text x="{LEFT + 10 + 110 * i}" y="{HEIGHT - 6}" fill="{colour[process]}">'
                     f'&#9679; {escape(process)}</text>')
    parts.append("</svg>")
    path.write_text("\n".join(parts))
    return path

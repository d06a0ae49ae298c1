"""The history of a run: every operation as JSON lines.

Each line is an object with at least ``time`` (seconds since the run
started), ``process`` (who did it), ``type`` and ``f``:

- ``type``: ``invoke`` (asked), ``ok`` (the system said it happened),
  ``fail`` (the system said it did not happen), ``info`` (unknown: a timeout,
  a lost connection; it may or may not have happened);
- ``f``: ``send`` (``topic``, ``value``, ``promise`` = ``once`` or
  ``at-least-once``, optional ``expected_offset`` and ``exclusive``; an ok
  carries ``offset`` when known), ``read`` (the final read of a topic:
  ``log`` = ``[[offset, value], ...]`` in topic order), ``fault`` (``value``:
  the kind, e.g. ``kill``, ``pause``, ``resume``, ``restart``).

Writers may be threads: :class:`History` is safe to append to from any.
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any, Iterator


class History:
    """Appends operations to a JSON-lines file (and keeps them in memory)."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self.ops: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self._file = open(self.path, "w", encoding="utf-8") if self.path is not None else None

    def add(self, process: str, type_: str, f: str, **fields: Any) -> dict[str, Any]:
        op = {"time": round(time.monotonic() - self._start, 6), "process": process, "type": type_, "f": f, **fields}
        with self._lock:
            self.ops.append(op)
            if self._file is not None:
                self._file.write(json.dumps(op, separators=(",", ":")) + "\n")
                self._file.flush()
        return op

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def read_history(path: Path | str) -> list[dict[str, Any]]:
    """The operations of a history file; ValueError names a malformed line."""
    return list(_lines(Path(path)))


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                op = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not JSON ({exc.msg})") from None
            if not isinstance(op, dict) or not {"process", "type", "f"} <= op.keys():
                raise ValueError(f"{path}:{number}: an operation needs process, type and f")
            yield op

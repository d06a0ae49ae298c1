"""The compiled hot path, if this install has it.

``_hot`` is built from ``_hot.c`` by ``pip install -e .`` (``setup.py``; the
build is optional). Its functions are byte-for-byte twins of pure-Python
ones (``fast_send.parse_send``, ``frames.send_frame_python``,
``frames.send_frames_python``, ``receipts.ReceiptTemplate.frame``,
``entry_format.build_entry``, ``receipt_runs.receipt_runs_python``,
``storage.framing.parse_frames_python``, ``fetch_payload.fetch_payload_python``,
``storage.read_budget.bytes_within_python``,
``storage.untracked.untrack_atoms_python``,
``storage.object.spilled_sections.gather_sections_python``,
``storage.object.spilled_sections.spill_places_python``), which the callers use when ``hot`` is None:
the extension was not built, or ``MAGNETAR_PURE_PYTHON=1`` asks for Python
(to compare costs, or to test the twins).
"""
from __future__ import annotations

import os
import warnings
from types import ModuleType

#: What this source tree's ``_hot.c`` defines. An extension built from an
#: older checkout lacks some: it is set aside (the twins run, with a warning)
#: rather than breaking the import.
FUNCTIONS = ("register_send_view", "register_frame_types", "parse_send", "send_frame", "send_frames",
             "receipt_frame", "build_entry", "crc32c", "receipt_runs", "parse_frames", "fetch_payload", "bytes_within",
             "untrack_atoms", "gather_sections", "spill_places")

hot: ModuleType | None = None
if os.environ.get("MAGNETAR_PURE_PYTHON", "") not in ("1", "true", "yes"):
    try:
        from . import _hot as hot
    except ImportError:  # not built here: the Python twins run
        hot = None
    if hot is not None and not all(hasattr(hot, name) for name in FUNCTIONS):
        warnings.warn(f"{hot.__file__} was built from older sources: running the pure-Python twins "
                      "(run make install to rebuild it)", RuntimeWarning, stacklevel=1)
        hot = None


def implementation() -> str:
    """``"compiled"`` or ``"python"``: which twins this process runs."""
    return "compiled" if hot is not None else "python"

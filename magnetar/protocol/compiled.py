"""The compiled hot path, if this install has it.

``_hot`` is built from ``_hot.c`` by ``pip install -e .`` (``setup.py``; the
build is optional). Its functions are byte-for-byte twins of pure-Python
ones (``fast_send.parse_send``, ``frames.send_frame_python``,
``frames.send_frames_python``, ``receipts.ReceiptTemplate.frame``,
``entry_format.build_entry``), which the callers use when ``hot`` is None:
the extension was not built, or ``MAGNETAR_PURE_PYTHON=1`` asks for Python
(to compare costs, or to test the twins).
"""
from __future__ import annotations

import os
from types import ModuleType

hot: ModuleType | None = None
if os.environ.get("MAGNETAR_PURE_PYTHON", "") not in ("1", "true", "yes"):
    try:
        from . import _hot as hot
    except ImportError:  # not built here: the Python twins run
        hot = None


def implementation() -> str:
    """``"compiled"`` or ``"python"``: which twins this process runs."""
    return "compiled" if hot is not None else "python"

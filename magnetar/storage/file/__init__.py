"""The file backend (``--storage file``, the default): ledgers as segment files.

- :mod:`.file_backend`: :class:`FileBackend`, the :class:`~..backend.LedgerBackend`;
- :mod:`.ledger`: one ledger's segment file, its offset index, the fence marker;
- :mod:`.group_commit`: the writer thread (group commits);
- :mod:`.durability`: how a round becomes durable (the seam), and
  ``SegmentSync`` (an fdatasync per segment file, ``journal = false``);
- :mod:`.journal`, :mod:`.journal_sync`: the broker's journal, one
  fdatasync per group commit for every ledger written (the default);
- :mod:`.journal_room`: the journal's files zero-filled ahead of their
  records, so that fdatasync waits for no filesystem transaction;
- :mod:`.journal_checkpoint` (with :mod:`.syncfs`): segment files synced in
  the background, the journal trimmed behind them;
- :mod:`.journal_replay`: dead processes' journals replayed into the
  segment files before any ledger opens;
- :mod:`.handles`: the bounded pool of open segment files.

Everything above storage reaches it only through ``LedgerBackend``.
"""
from .file_backend import FileBackend

__all__ = ["FileBackend"]

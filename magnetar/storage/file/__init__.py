"""The file backend (``--storage file``, the default): ledgers as segment files.

- :mod:`.file_backend`: :class:`FileBackend`, the :class:`~..backend.LedgerBackend`;
- :mod:`.ledger`: one ledger's segment file, its offset index, the fence marker;
- :mod:`.group_commit`: the writer thread (group commits, fsync policy);
- :mod:`.handles`: the bounded pool of open segment files.

Everything above storage reaches it only through ``LedgerBackend``.
"""
from .file_backend import FileBackend

__all__ = ["FileBackend"]

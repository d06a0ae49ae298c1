"""The object backend (``--storage object``): ledgers in an S3-compatible
object store, their index and fence in the metadata store.

- :mod:`.object_backend`: ``ObjectBackend``, the :class:`~..backend.LedgerBackend`;
- :mod:`.commit`: one object per commit interval across all ledgers, one
  metadata transaction, then the receipts (:mod:`.commit_timings`: where a
  commit's time goes);
- :mod:`.index`: the metadata layout (ledger records, sections);
- :mod:`.section_cache`: sections read back, cached;
- :mod:`.compactor`: sealed ledgers into chunk objects, orphaned objects deleted.

Nothing is imported here: a broker on files loads none of it (the factory
imports ``ObjectBackend`` when ``--storage object`` asks for it).
"""

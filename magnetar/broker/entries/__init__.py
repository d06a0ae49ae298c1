"""The stored entry: how a client's payload becomes one ledger entry.

Owns: ``entry_format`` (broker entry metadata: offsets and publish time,
building and reading it, stripping it for old clients) and ``message_peek``
(reading a message's metadata fields without decoding the whole entry).
May import: the broker's vocabulary and ``magnetar.protocol``. Nothing above.
"""

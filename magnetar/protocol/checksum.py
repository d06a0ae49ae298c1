"""CRC32C (Castagnoli), the checksum of Pulsar's payload frames, in C.

Uses the ``crc32c`` package, which reads any buffer (bytes, memoryview) in
place with the CPU's CRC instruction: frames are checked without a copy.
"""
from __future__ import annotations

import crc32c as _crc32c


#: ``crc32c(data, initial=0)``: CRC32C of ``data`` continuing from ``initial``
#: (0 starts a new sum). The package's function itself, not a wrapper: it runs
#: once per entry and a Python frame around it cost more than the sum of 100 B.
crc32c = _crc32c.crc32c

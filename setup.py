"""Only for the compiled hot paths; everything else is in pyproject.toml.

``magnetar.protocol._hot`` and ``magnetar.storage.file._round`` (C files,
no library) are optional: if one cannot be built (no compiler, no Python headers) the install goes on and
the pure-Python twins run (see ``magnetar/protocol/compiled.py``,
``magnetar/storage/file/round_io.py``).
"""
from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("magnetar.protocol._hot", ["magnetar/protocol/_hot.c", "magnetar/protocol/_hot_fetch.c",
                                             "magnetar/protocol/_hot_gather.c"],
                  depends=["magnetar/protocol/_crc32c.h", "magnetar/protocol/_hot_fetch.h",
                           "magnetar/protocol/_hot_gather.h"],
                  optional=True,
                  extra_compile_args=["-O2", "-std=c11", "-Wall"]),
        # A group commit's per-ledger system calls in one call per round (storage/file/round_io.py
        # is its pure-Python twin).
        Extension("magnetar.storage.file._round", ["magnetar/storage/file/_round.c"], optional=True,
                  extra_compile_args=["-O2", "-std=c11", "-Wall"]),
        # The Spark connector's column work (reads, writes, key routing); the same
        # rule: optional, with a pure-Python twin (pyspark_magnetar/entry_columns.py).
        Extension("pyspark_magnetar._columns", ["pyspark_magnetar/_columns.c", "pyspark_magnetar/_columns_decode.c",
                                                "pyspark_magnetar/_columns_fetch.c",
                                                "pyspark_magnetar/_columns_encode.c", "pyspark_magnetar/_columns_keys.c",
                                                "pyspark_magnetar/_columns_pool.c"],
                  # CRC32C is the broker's (one header for both modules).
                  include_dirs=["magnetar/protocol"],
                  depends=["pyspark_magnetar/_columns.h", "pyspark_magnetar/_columns_rows.h",
                           "magnetar/protocol/_crc32c.h"], optional=True,
                  extra_compile_args=["-O2", "-std=c11", "-Wall"]),
    ],
)

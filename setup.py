"""Only for the compiled hot paths; everything else is in pyproject.toml.

``magnetar.protocol._hot`` (one C file, no library) is optional: if it
cannot be built (no compiler, no Python headers) the install goes on and
the pure-Python twins run (see ``magnetar/protocol/compiled.py``).
"""
from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("magnetar.protocol._hot", ["magnetar/protocol/_hot.c"], depends=["magnetar/protocol/_crc32c.h"],
                  optional=True,
                  extra_compile_args=["-O2", "-std=c11", "-Wall"]),
        # The Spark connector's column work (reads, writes, key routing); the same
        # rule: optional, with a pure-Python twin (pyspark_magnetar/entry_columns.py).
        Extension("pyspark_magnetar._columns", ["pyspark_magnetar/_columns.c", "pyspark_magnetar/_columns_decode.c",
                                                "pyspark_magnetar/_columns_fetch.c",
                                                "pyspark_magnetar/_columns_encode.c", "pyspark_magnetar/_columns_keys.c"],
                  # CRC32C is the broker's (one header for both modules).
                  include_dirs=["magnetar/protocol"],
                  depends=["pyspark_magnetar/_columns.h", "pyspark_magnetar/_columns_rows.h",
                           "magnetar/protocol/_crc32c.h"], optional=True,
                  extra_compile_args=["-O2", "-std=c11", "-Wall"]),
    ],
)

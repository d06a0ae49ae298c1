"""Only for the compiled hot path; everything else is in pyproject.toml.

``magnetar.protocol._hot`` (one C file, no library) is optional: if it
cannot be built (no compiler, no Python headers) the install goes on and
the pure-Python twins run (see ``magnetar/protocol/compiled.py``).
"""
from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("magnetar.protocol._hot", ["magnetar/protocol/_hot.c"], optional=True,
                  extra_compile_args=["-O2", "-std=c11", "-Wall"]),
    ],
)

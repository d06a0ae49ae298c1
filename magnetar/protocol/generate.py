"""Regenerate (or check) the Python module compiled from the project's .proto.

``python -m magnetar.protocol.generate`` rewrites ``magnetar_api_pb2.py`` next to
this file from ``proto/magnetar_api.proto``. With ``--check`` it writes nothing
and exits 1 when the committed module differs from what protoc would produce,
so a .proto edit without a regeneration fails the unit tests.

Needs ``grpcio-tools`` (a test dependency), which bundles protoc.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROTO_DIR = HERE / "proto"
PROTO_NAME = "magnetar_api.proto"
TARGET = HERE / "magnetar_api_pb2.py"


def generate() -> str:
    """Return the module source protoc produces for the project's .proto."""
    from grpc_tools import protoc

    with tempfile.TemporaryDirectory() as out:
        rc = protoc.main(["protoc", f"-I{PROTO_DIR}", f"--python_out={out}", str(PROTO_DIR / PROTO_NAME)])
        if rc != 0:
            raise RuntimeError(f"protoc failed with exit code {rc}")
        return (Path(out) / "magnetar_api_pb2.py").read_text()


def main(argv: list[str]) -> int:
    fresh = generate()
    if "--check" in argv:
        current = TARGET.read_text() if TARGET.exists() else ""
        if current != fresh:
            print(f"{TARGET} is stale: run `make proto`", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(fresh)
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""A broker loads cluster, security and replication code only when its
configuration asks for them: a standalone broker without security stays
small (idle RSS 67 -> 56 MiB when this was done; docs/ARCHITECTURE.md).

The imports a standalone broker makes are checked in a fresh interpreter
(this test process has imported everything already)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Loaded only by a clustered broker, a region, or configured authentication / TLS files.
LAZY = ("magnetar.broker.cluster.member", "magnetar.broker.cluster.channel", "magnetar.broker.cluster.leader",
        "magnetar.replication", "magnetar.metadata.etcd", "aetcd", "grpc", "cryptography", "jwt", "passlib",
        "bcrypt", "magnetar.security.tokens", "magnetar.security.htpasswd", "magnetar_chaos")


def test_a_standalone_broker_without_security_imports_none_of_the_optional_code():
    probe = (
        "import json, sys\n"
        "import magnetar.cli\n"
        "from magnetar.broker.config import load_config\n"
        "from magnetar.broker.server import server\n"
        "from magnetar.admin import app\n"
        "from magnetar.security import authentication\n"
        "authentication.build(load_config(None, {}))\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    found = sorted(m for m in loaded if any(m == lazy or m.startswith(lazy + ".") for lazy in LAZY))
    assert not found, f"a standalone broker imports optional code: {found}"

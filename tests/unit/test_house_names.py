"""One meaning per name: no two public classes of ours share a name.

Ours: the product (``magnetar/``), the tools beside it (the chaos tool, the
process harness, ``bench/``) and the Spark connector.

A reader who meets ``NotFound`` or ``Session`` should not have to look at the
import to know which one it is. Every public class defined at module level
counts, including the client's exceptions built by a factory
(``X = _kind("X", ...)``).

The one exception is the client. Its public names are the official ``pulsar``
package's (a user switches clients by changing an import), so it may repeat a
server-side name when both mean the same thing seen from the two ends of the
wire: an outcome named in the client's ``Result`` (``TopicNotFound``:
the broker refuses with it, the client raises it), or one of the few objects
that exist on both ends (:data:`BOTH_ENDS`). Anything else shared fails here
with the files that define it: rename one of them to what it is.
"""
from __future__ import annotations

import ast
import collections
import pathlib

from magnetar.client.errors import Result

ROOT = pathlib.Path(__file__).resolve().parents[2]
OURS = [ROOT / name for name in ("magnetar", "magnetar_chaos", "magnetar_harness", "bench", "pyspark_magnetar")]
CLIENT = ROOT / "magnetar" / "client"

#: Objects both ends hold, one per end, under the official client's name: a
#: producer and a consumer (the client's handle, the broker's record of it),
#: and a producer-id lease (the broker grants it, the client holds it).
BOTH_ENDS = {"Producer", "Consumer", "PidLease"}


def _class_factories(tree: ast.Module) -> set[str]:
    """Module-level functions that return ``type(...)``: their calls define classes."""
    found = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            for inner in ast.walk(node):
                if (isinstance(inner, ast.Return) and isinstance(inner.value, ast.Call)
                        and isinstance(inner.value.func, ast.Name) and inner.value.func.id == "type"):
                    found.add(node.name)
    return found


def module_classes(path: pathlib.Path) -> list[str]:
    """Names of the classes ``path`` defines at module level."""
    tree = ast.parse(path.read_text(), str(path))
    factories = _class_factories(tree) | {"type"}
    names = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names.append(node.name)
        elif (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
              and isinstance(node.value.func, ast.Name) and node.value.func.id in factories):
            names.extend(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def public_classes(path: pathlib.Path) -> list[str]:
    """Names of the public classes ``path`` defines at module level."""
    return [n for n in module_classes(path) if not n.startswith("_")]


def definitions(*roots: pathlib.Path) -> dict[str, list[pathlib.Path]]:
    found: dict[str, list[pathlib.Path]] = collections.defaultdict(list)
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            for name in public_classes(path):
                found[name].append(path)
    return found


def clashes(found: dict[str, list[pathlib.Path]], client: pathlib.Path = CLIENT,
            root: pathlib.Path = ROOT) -> dict[str, list[str]]:
    """Names defined more than once that the rule for ``client`` does not excuse."""
    mirrored = set(Result.__members__) | BOTH_ENDS
    bad = {}
    for name, paths in found.items():
        if len(paths) < 2:
            continue
        in_client = [p for p in paths if p.is_relative_to(client)]
        outside = [p for p in paths if not p.is_relative_to(client)]
        if len(in_client) == 1 and len(outside) == 1 and name in mirrored:
            continue
        bad[name] = [str(p.relative_to(root)) for p in paths]
    return bad


def test_every_public_class_name_has_one_meaning():
    present = [root for root in OURS if root.is_dir()]
    assert ROOT / "magnetar" in present
    assert clashes(definitions(*present)) == {}


def test_no_private_class_name_is_defined_twice():
    """A private class is read where it is defined, but a reader who met
    ``_Batch`` (a group-commit write) in one module took it for the same
    idea in another (a commit's batch): one name, one idea here too."""
    found: dict[str, list[str]] = collections.defaultdict(list)
    for root in (r for r in OURS if r.is_dir()):
        for path in sorted(root.rglob("*.py")):
            for name in module_classes(path):
                if name.startswith("_"):
                    found[name].append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in found.items() if len(paths) > 1} == {}


def test_the_check_sees_classes_and_factory_made_classes(tmp_path):
    """The check itself: a clash outside the client, or a non-mirrored one
    with the client, is reported; a mirrored wire outcome is not."""
    (tmp_path / "metadata").mkdir()
    (tmp_path / "metadata" / "store.py").write_text("class NotFound(Exception):\n    pass\n")
    (tmp_path / "namespaces").mkdir()
    (tmp_path / "namespaces" / "resources.py").write_text("class NotFound(Exception):\n    pass\n")
    (tmp_path / "client").mkdir()
    (tmp_path / "client" / "errors.py").write_text(
        "def _kind(name):\n    return type(name, (Exception,), {})\n\n"
        "Session = _kind('Session')\nTopicNotFound = _kind('TopicNotFound')\n")
    (tmp_path / "server.py").write_text("class Session:\n    pass\n\nclass TopicNotFound(Exception):\n    pass\n")
    found = definitions(tmp_path)
    assert set(found) == {"NotFound", "Session", "TopicNotFound"}
    assert set(clashes(found, tmp_path / "client", tmp_path)) == {"NotFound", "Session"}

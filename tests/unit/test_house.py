"""The shape of the house: no import circles, and layers that only look down.

Every ``import`` in ``magnetar/`` counts, including those under
``if TYPE_CHECKING:`` and inside functions: a type-only import still means
"you must read that module to read this one". A failure names the modules of
the circle, or the import that looks up, so the fix is obvious: pass a
callback, or type the collaborator with a small ``typing.Protocol`` below.
"""
from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "magnetar"

#: Top-level packages from the bottom up: a package may import those before it.
LAYERS = ["processes", "protocol", "metadata", "objectstore", "storage", "security", "broker", "client", "replication", "perf", "admin", "cli"]

#: Rooms of ``magnetar/broker/`` from the bottom up ("" is the broker's own
#: vocabulary: errors, topic names, config).
BROKER_ROOMS = ["", "namespaces", "entries", "subscriptions", "policies", "topics", "cluster", "server"]


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: pathlib.Path) -> set[str]:
    """Every ``magnetar`` module ``path`` imports (relative ones resolved)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            # ``from pkg import mod`` imports a module too.
            found.update(f"{module}.{a.name}" for a in node.names)
    return {m for m in found if m.startswith("magnetar")}


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py") if not p.name.endswith("_pb2.py")}
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for imported in imports_of(path):
            # Resolve to the deepest known module (``from x import name`` names a symbol).
            while imported and imported not in modules:
                imported = imported.rpartition(".")[0]
            if imported and imported != name and not name.startswith(imported + "."):
                targets.add(imported)
        edges[name] = targets
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


#: Circles being taken apart right now (each entry goes with its fix; the list
#: must end empty). A circle not listed here fails the test, and so does a
#: listed one that is gone, so the list cannot go stale.
BEING_REMOVED: list[list[str]] = []


def test_no_import_circle():
    found = circles(graph())
    new = [c for c in found if c not in BEING_REMOVED]
    assert not new, "import circles:\n" + "\n".join(" <-> ".join(c) for c in new)
    gone = [c for c in BEING_REMOVED if c not in found]
    assert not gone, "no longer circles, remove them from BEING_REMOVED:\n" + "\n".join(map(str, gone))


def _rank(module: str, order: list[str], depth: int) -> int | None:
    parts = module.split(".")
    if len(parts) <= depth:
        return None
    key = parts[depth] if len(parts) > depth + 1 else ""
    key = key if key in order else ("" if "" in order else key)
    return order.index(key) if key in order else None


def layer_violations(edges: dict[str, set[str]]) -> list[str]:
    wrong = []
    for source, targets in edges.items():
        for target in targets:
            s, t = _rank(source, LAYERS, 1), _rank(target, LAYERS, 1)
            if s is not None and t is not None and t > s:
                wrong.append(f"{source} imports {target} (a higher layer)")
            if source.startswith("magnetar.broker.") and target.startswith("magnetar.broker."):
                s, t = _rank(source, BROKER_ROOMS, 2), _rank(target, BROKER_ROOMS, 2)
                if s is not None and t is not None and t > s:
                    wrong.append(f"{source} imports {target} (a higher room of broker/)")
    return sorted(wrong)


def test_layers_only_look_down():
    wrong = layer_violations(graph())
    assert not wrong, "\n".join(wrong)


def test_the_checks_see_a_circle_and_an_upward_import():
    edges = {"magnetar.a": {"magnetar.b"}, "magnetar.b": {"magnetar.a"}, "magnetar.c": set()}
    assert circles(edges) == [["magnetar.a", "magnetar.b"]]
    assert layer_violations({"magnetar.storage.x": {"magnetar.broker.y"}}) == [
        "magnetar.storage.x imports magnetar.broker.y (a higher layer)"]
    assert layer_violations({"magnetar.broker.subscriptions.x": {"magnetar.broker.topics.y"}}) == [
        "magnetar.broker.subscriptions.x imports magnetar.broker.topics.y (a higher room of broker/)"]


ROOMS_BUILT = sorted(p.name for p in (PACKAGE / "broker").iterdir() if (p / "__init__.py").exists())


@pytest.mark.parametrize("room", ROOMS_BUILT)
def test_every_broker_room_has_its_place_and_says_what_it_owns(room):
    assert room in BROKER_ROOMS, f"broker/{room} has no place in BROKER_ROOMS: put it in the order"
    init = PACKAGE / "broker" / room / "__init__.py"
    assert ast.get_docstring(ast.parse(init.read_text())), f"broker/{room}/__init__.py has no docstring"


#: The developer tools beside the product (tools/pyproject.toml): the product's
#: install does not ship them, so the product never imports them (the chaos
#: tool has its own command, ``magnetar-chaos``).
TOOL_PACKAGES = ("magnetar_chaos", "magnetar_harness")


def test_the_product_imports_no_developer_tool():
    wrong = []
    for path in PACKAGE.rglob("*.py"):
        name = module_name(path)
        for imported in imports_of(path):
            if imported.split(".")[0] in TOOL_PACKAGES:
                wrong.append(f"{name} imports {imported}")
    assert not wrong, "\n".join(sorted(wrong))


def _called_name(node: ast.AST) -> str | None:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def imported_by_string(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, name)`` of each ``import_module("magnetar...")``, also when
    handed to another call (``to_thread(importlib.import_module, "...")``)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            called = {_called_name(node.func), *map(_called_name, node.args)}
            if called & {"import_module", "__import__"}:
                found += [(node.lineno, a.value) for a in node.args
                          if isinstance(a, ast.Constant) and str(a.value).startswith("magnetar")]
    return found


def test_no_module_of_ours_is_imported_by_a_string():
    """A module imported by its name as a string hides an edge from the checks
    above (the broker loaded the admin app so, while admin imports the
    broker: a circle nobody saw). Hand the collaborator in instead."""
    wrong = [f"{module_name(path)}:{line} imports {name} by a string"
             for path in PACKAGE.rglob("*.py") for line, name in imported_by_string(ast.parse(path.read_text()))]
    assert not wrong, "\n".join(sorted(wrong))
    hidden = 'admin = await asyncio.to_thread(importlib.import_module, "magnetar.admin.app")'
    assert imported_by_string(ast.parse(hidden)) == [(1, "magnetar.admin.app")]

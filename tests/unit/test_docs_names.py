"""The docs name only what exists: every ``magnetar ...`` (and
``magnetar-chaos ...``) command line in a code block or code span of
README.md and docs/*.md is a command of that CLI with options it takes, and
every repository path they name is there.

A doc that cites a missing file (``CLUSTER.md``) or a command that was
renamed misleads the reader more than silence; this test fails instead.
"""
from __future__ import annotations

import functools
import glob
import re
import shlex
from pathlib import Path

import pytest
import typer

from magnetar.cli import app

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_BLOCKS = {"", "sh", "shell", "bash", "console"}
_FENCE = re.compile(r"^```(\S*)\s*$")
_SPAN = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
_STOP = {"|", "||", "&&", ";", "&", ">", ">>", "<", "2>&1", "#"}
TOP = {p.name for p in ROOT.iterdir() if not p.name.startswith(".")}


def _parts(path: Path) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(line, text) of shell blocks' commands and of the code spans of prose lines."""
    lines = path.read_text().split("\n")
    commands, spans, i = [], [], 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if fence:
            end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), len(lines))
            if fence.group(1) in SHELL_BLOCKS:
                text = "\n".join(lines[i + 1:end]).replace("\\\n", " ")
                commands += [(i + 2, line) for line in text.split("\n")]
            i = end + 1
            continue
        spans += [(i + 1, s) for s in _SPAN.findall(lines[i])]
        i += 1
    return commands, spans


PROGRAMS = ("magnetar", "magnetar-chaos")


def _command_lines(text: str) -> list[tuple[str, list[str]]]:
    """``(program, arguments)`` after each ``magnetar`` or ``magnetar-chaos`` word of a command line."""
    try:
        words = shlex.split(text, comments=True)
    except ValueError:
        words = text.split()
    found = []
    for k, word in enumerate(words):
        program = word.rpartition("/")[2] if word.endswith(tuple(f"bin/{p}" for p in PROGRAMS)) else word
        if program in PROGRAMS:
            args = []
            for w in words[k + 1:]:
                if w in _STOP or w.startswith(("$(", "`")):
                    break
                args.append(w)
            found.append((program, args))
    return found


@functools.lru_cache(maxsize=2)
def _root(program: str):
    if program == "magnetar-chaos":  # the chaos tool beside the product, its own command
        from magnetar_chaos.cli import chaos_app

        return typer.main.get_command(chaos_app)
    return typer.main.get_command(app)


def check_command(args: list[str], program: str = "magnetar") -> str | None:
    """None if ``<program> <args>`` names a command and options that exist, else why not."""
    command = _root(program)
    path, options, takes_value = [program], set(), set()
    skip = False
    for raw in args:
        if skip:  # the value of the option before
            skip = False
            continue
        word = raw.strip("[]")
        if word in ("...", "…") or not word or "<" in word or "{" in word:
            break
        for p in command.params:
            names = {*p.opts, *p.secondary_opts}
            options |= names
            if getattr(p, "param_type_name", "") == "option" and not p.is_flag and not getattr(p, "count", False):
                takes_value |= names
        if word.startswith("-") and word != "-":
            name = word.split("=", 1)[0]
            if name not in options and name not in ("--help", "-h"):
                return f"{' '.join(path)}: no option {name}"
            skip = name in takes_value and "=" not in word
            continue
        if hasattr(command, "commands"):
            names = word.split("|")
            unknown = [n for n in names if n not in command.commands]
            if unknown:
                return f"{' '.join(path)}: no command {unknown[0]!r}"
            if len(names) > 1:
                break
            command = command.commands[word]
            path.append(word)
    return None


def _repo_path(span: str) -> str | None:
    """The repository path a code span names (None: it names none)."""
    span = span.strip().rstrip(".,:;")
    if " " in span or span.startswith(("http", "/", "$", "~")) or "=" in span:
        return None
    span = span.split("::")[0]
    first = span.split("/")[0]
    if "/" in span and first in TOP:
        return span
    # Bare names: documents and config files (a bare module name is read
    # within its section's package).
    if "/" not in span and re.fullmatch(r"[A-Za-z][\w.-]*\.(md|toml)", span):
        return span
    return None


def _exists(doc: Path, name: str) -> bool:
    candidates = [ROOT / name, doc.parent / name, ROOT / "docs" / name]
    return any(glob.glob(str(c)) for c in candidates)


def _problems(doc: Path) -> list[str]:
    commands, spans = _parts(doc)
    problems = []
    for line, text in commands + spans:
        for program, args in _command_lines(text):
            why = check_command(args, program)
            if why:
                problems.append(f"{doc.name}:{line}: {why}")
    for line, text in spans:
        name = _repo_path(text)
        if name and not _exists(doc, name):
            problems.append(f"{doc.name}:{line}: names {name}, which does not exist")
        test = re.fullmatch(r"(\S+\.py)::(\w+)", text.strip())
        if test and (ROOT / test[1]).is_file() and f"def {test[2]}" not in (ROOT / test[1]).read_text():
            problems.append(f"{doc.name}:{line}: {test[1]} has no {test[2]}")
    for n, line in enumerate(doc.read_text().split("\n"), 1):
        for target in _LINK.findall(line):
            if not target.startswith(("http", "mailto:")) and not _exists(doc, target):
                problems.append(f"{doc.name}:{n}: links {target}, which does not exist")
    return problems


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_the_docs_name_only_commands_options_and_files_that_exist(doc):
    problems = _problems(doc)
    assert not problems, "\n".join(problems)


def test_the_checker_catches_what_it_should():
    assert check_command(["admin", "brokers", "list"]) is None
    assert check_command(["admin", "--url", "http://x", "namespaces", "split-bundle", "ns", "--bundle", "b"]) is None
    assert check_command(["admin", "brokers", "lst"]) == "magnetar admin brokers: no command 'lst'"
    assert check_command(["cluster", "up", "--brokerz", "3"]) == "magnetar cluster up: no option --brokerz"
    assert check_command(["admin", "schemas", "get|upload|delete"]) is None
    assert check_command(["run", "--seed", "7"], "magnetar-chaos") is None
    assert check_command(["run", "--sed", "7"], "magnetar-chaos") == "magnetar-chaos run: no option --sed"
    assert check_command(["chaos", "run"]) == "magnetar: no command 'chaos'"
    assert _command_lines("sudo .venv/bin/magnetar-chaos run --seed 1") == [("magnetar-chaos", ["run", "--seed", "1"])]
    assert _repo_path("CLUSTER.md") == "CLUSTER.md" and not _exists(ROOT / "docs" / "cluster.md", "CLUSTER.md")
    assert _repo_path("magnetar/broker/cluster/") and _repo_path("magnetar.client") is None

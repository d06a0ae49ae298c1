"""What a new user meets in the first hour: the README's first Python
snippet runs after what the line before it installs, a topic name with an
empty part says which part, and CLI errors piped to a file stay one line."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from magnetar.admin.client import topic_path
from magnetar.broker.topic_name import InvalidTopicName, parse
from magnetar.processes.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


def _runtime_distributions() -> set[str]:
    """What ``make standalone`` installs: the project's runtime dependencies, by distribution name."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return {re.split(r"[<>=!~\[; ]", d, 1)[0].lower() for d in deps}


def test_the_readmes_first_python_snippet_runs_after_what_the_text_before_it_installs():
    readme = (ROOT / "README.md").read_text()
    start = readme.index("```python\n")
    snippet = readme[start + len("```python\n"):readme.index("```", start + 10)]
    before = readme[readme.rindex("\n## ", 0, start):start]
    imported = {alias.name.split(".")[0] for node in ast.walk(ast.parse(snippet))
                if isinstance(node, (ast.Import, ast.ImportFrom))
                for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")])}
    # The import name of each distribution a user may lack after `make standalone`.
    distribution = {"pulsar": "pulsar-client"}
    for module in imported:
        if module == "magnetar":
            continue  # the project itself
        dist = distribution.get(module, module)
        assert dist in _runtime_distributions() or f"pip install {dist}" in before, (
            f"README's first snippet imports {module} ({dist}): make standalone does not install it "
            "and the text before the snippet does not say to")


@pytest.mark.parametrize("name, part", [("persistent://public//x", "namespace"), ("persistent:///default/x", "tenant"),
                                        ("persistent://public/default/", "topic")])
def test_a_topic_name_with_an_empty_part_says_which(name, part):
    with pytest.raises(InvalidTopicName, match=f"the {part} part is empty"):
        parse(name)
    with pytest.raises(ValueError, match=f"the {part} part is empty"):
        topic_path(name)


def test_a_cli_error_piped_to_a_file_is_one_line(tmp_path):
    # A service URL with a path: the error quotes it and says what to give instead, past 80 columns.
    url = f"pulsar://127.0.0.1:{free_port()}/with-a-long-path-so-that-the-line-runs-well-past-eighty-columns"
    with open(tmp_path / "err", "w") as err:
        done = subprocess.run([sys.executable, "-m", "magnetar.cli", "produce", "t", "-m", "x", "-u", url],
                              stdout=subprocess.DEVNULL, stderr=err, timeout=60)
    text = (tmp_path / "err").read_text()
    assert done.returncode != 0
    lines = text.strip().splitlines()
    assert len(lines) == 1 and len(lines[0]) > 80 and lines[0].startswith("error: service URL"), text

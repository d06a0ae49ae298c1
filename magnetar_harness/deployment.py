"""The deployment's own files, run as they are: the systemd units and
config templates of ``deploy/`` (docs/deploy.md) turned into the command
line and config file of one part on one host of the test bed.

An operator renders a template with ``envsubst`` and installs a unit whose
``ExecStart`` names absolute paths (``/opt/magnetar/bin/...``,
``/etc/magnetar/...``, ``/var/lib/...``). Here the same text is read, its
``${VAR}``s substituted the same way (:class:`string.Template`, the
variables of the host's environment file), and only the roots of the paths
moved: the binaries to this interpreter's ``bin/``, ``/etc``, ``/var/lib``
and ``/run`` under the host's own directory. Nothing else of the command
line changes: a flag the doc's unit does not have, the test bed does not
pass.

Failure modes: :class:`DeploymentError` when a unit has no ``ExecStart`` or
a template names a variable the host does not set.
"""
from __future__ import annotations

import re
import shlex
import string
import sys
from pathlib import Path

#: The repository's deploy/ directory.
DEPLOY_DIR = Path(__file__).resolve().parent.parent / "deploy"
#: Where the units say the binaries are.
BINARY_ROOTS = ("/opt/magnetar/bin/", "/usr/local/bin/")
#: Roots of the paths that live on a host (moved under its directory).
HOST_ROOTS = re.compile(r"(?<![\w/.$-])/(etc|var/lib|run)/")


class DeploymentError(ValueError):
    """A unit or template of deploy/ cannot be used as the test bed needs."""


def read_env_file(path: Path) -> dict[str, str]:
    """``KEY=value`` lines (systemd's EnvironmentFile), comments skipped."""
    env = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            env[key.strip()] = value.strip().strip('"')
    return env


def render(text: str, variables: dict[str, str], what: str) -> str:
    """``${VAR}`` substituted from ``variables`` (envsubst's syntax);
    DeploymentError naming the missing variable."""
    try:
        return string.Template(text).substitute(variables)
    except KeyError as exc:
        raise DeploymentError(f"{what} needs the variable {exc.args[0]}, which this host does not set") from None


def rooted(text: str, root: Path) -> str:
    """``text`` with its host paths under ``root`` and its binaries this interpreter's."""
    for prefix in BINARY_ROOTS:
        text = text.replace(prefix, str(Path(sys.executable).parent) + "/")
    return HOST_ROOTS.sub(lambda m: f"{root}/{m.group(1)}/", text)


def exec_start(unit: str) -> tuple[str, str | None]:
    """A unit's ``ExecStart`` line and its ``EnvironmentFile`` (None if it has none)."""
    text = (DEPLOY_DIR / unit).read_text()
    command = re.search(r"^ExecStart=(.+)$", text, re.M)
    if command is None:
        raise DeploymentError(f"deploy/{unit} has no ExecStart line")
    env_file = re.search(r"^EnvironmentFile=-?(.+)$", text, re.M)
    return command.group(1).strip(), env_file.group(1).strip() if env_file else None


def unit_command(unit: str, root: Path, variables: dict[str, str] | None = None) -> list[str]:
    """The command line ``deploy/<unit>`` runs on a host whose files are
    under ``root``: its environment file (if it names one) read from the
    host's ``/etc``, ``variables`` on top."""
    command, env_file = exec_start(unit)
    env: dict[str, str] = {}
    if env_file:
        path = Path(rooted(env_file, root))
        if path.exists():
            env = read_env_file(path)
    env.update(variables or {})
    return shlex.split(rooted(render(command, env, f"deploy/{unit}"), root))


def install_template(template: str, destination: str, root: Path, variables: dict[str, str]) -> Path:
    """``envsubst < deploy/<template> > <destination>`` on the host under
    ``root``; the paths in it moved there too. Returns the file written."""
    text = rooted(render((DEPLOY_DIR / template).read_text(), variables, f"deploy/{template}"), root)
    path = Path(rooted(destination, root))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def write_env_file(template: str, destination: str, root: Path, variables: dict[str, str]) -> Path:
    """``deploy/<template>`` (KEY=value lines) with the host's values of
    ``variables`` in place of the examples, written to ``destination``."""
    lines = []
    for line in (DEPLOY_DIR / template).read_text().splitlines():
        key = line.partition("=")[0].strip()
        if not line.startswith("#") and "=" in line and key in variables:
            line = f"{key}={variables[key]}"
        lines.append(line)
    path = Path(rooted(destination, root))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def override_toml(path: Path, settings: dict[str, str]) -> None:
    """Set ``settings`` (``key`` or ``table.key`` -> a TOML value, as text)
    in the rendered file at ``path``: a key's line replaced where it is,
    else added at the top of its table. What the test bed changes of an
    operator's file (a chaos run's shorter session) is said where it is
    asked for; DeploymentError for a table the file does not have."""
    lines = path.read_text().splitlines()
    for dotted, value in settings.items():
        table, _, key = dotted.rpartition(".")
        start = 0
        if table:
            try:
                start = lines.index(f"[{table}]") + 1
            except ValueError:
                raise DeploymentError(f"{path} has no [{table}] table for {dotted}") from None
        end = next((i for i in range(start, len(lines)) if lines[i].startswith("[")), len(lines))
        for i in range(start, end):
            if re.match(rf"{re.escape(key)}\s*=", lines[i]):
                lines[i] = f"{key} = {value}"
                break
        else:
            lines.insert(start, f"{key} = {value}")
    path.write_text("\n".join(lines) + "\n")

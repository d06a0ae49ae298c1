"""What every asyncio task of the broker is waiting on, written to the log
on SIGUSR1 (``kill -USR1 <pid>``).

For a broker that does not stop or answer: the harness sends it before
its SIGKILL when a clean stop overran, so the log says where the stop hung.
Costs nothing until the signal comes; never raises (a task that ends while
it is printed is skipped).
"""
from __future__ import annotations

import asyncio
import io
import logging

log = logging.getLogger(__name__)


def log_task_stacks() -> None:
    """One WARNING record listing every task with its stack. Call on the loop."""
    out = io.StringIO()
    tasks = asyncio.all_tasks()
    for task in sorted(tasks, key=lambda t: t.get_name()):
        try:
            task.print_stack(limit=12, file=out)
        except Exception:  # noqa: BLE001 (a diagnostic must not take the broker down)
            continue
    log.warning("SIGUSR1: %d asyncio tasks\n%s", len(tasks), out.getvalue())

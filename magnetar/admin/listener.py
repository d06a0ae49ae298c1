"""The admin HTTP API as a broker runs it: handed in by the command that
starts the broker (``run(config, admin=AdminListener())``), so the broker
imports nothing of the admin package and the import graph shows the real
direction (admin uses the broker, never the other way).

The API's routes and aiohttp (about half of a broker's start-up imports) are
imported on a thread when :meth:`start` runs: the Pulsar listener already
serves clients meanwhile. Failure modes: :meth:`start` and
:meth:`start_tls` raise ``OSError`` for a port they cannot listen on,
:meth:`start_tls` ``TlsSetupError`` for unusable certificate files (the
broker turns both into its one-line ``StartupError``).
"""
from __future__ import annotations

import asyncio
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from magnetar.broker.server.server import Broker


def _import_app() -> ModuleType:
    from . import app

    return app


class AdminListener:
    """The admin API of one broker: http, then https when configured."""

    def __init__(self) -> None:
        self._app: ModuleType | None = None
        self._runner = None

    async def start(self, broker: "Broker", host: str, port: int) -> int:
        """Serve the API over http on ``port`` (0: any); the bound port."""
        self._app = await asyncio.to_thread(_import_app)
        self._runner, bound = await self._app.start_admin(broker, host, port)
        return bound

    async def start_tls(self, config, host: str) -> int:
        """The same API over https on ``config.admin_tls_port``, after :meth:`start`; the bound port."""
        return await self._app.start_admin_tls(self._runner, config, host)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

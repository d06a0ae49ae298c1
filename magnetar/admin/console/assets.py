"""The console's static files, served from this package's ``static/`` folder.

``GET /console/`` is the single page; ``GET /console/{path}`` a file under
``static/``. A path that leaves the folder, or names no file, is 404. Files
are sent with a short cache lifetime so a broker upgrade is seen quickly.
"""
from __future__ import annotations

import mimetypes
from pathlib import Path

from aiohttp import web

ROOT = (Path(__file__).parent / "static").resolve()

_TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html", ".svg": "image/svg+xml"}


def asset_path(relative: str) -> Path | None:
    """The file for ``relative`` under ``static/``, or None (missing, or outside)."""
    candidate = (ROOT / relative).resolve()
    if not candidate.is_relative_to(ROOT) or not candidate.is_file():
        return None
    return candidate


def _send(path: Path) -> web.Response:
    kind = _TYPES.get(path.suffix) or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return web.Response(body=path.read_bytes(), content_type=kind, headers={"Cache-Control": "max-age=60"})


async def console_root(request: web.Request) -> web.StreamResponse:
    raise web.HTTPFound("/console/")


async def console_page(request: web.Request) -> web.Response:
    return _send(ROOT / "index.html")


async def console_file(request: web.Request) -> web.Response:
    path = asset_path(request.match_info["path"])
    if path is None:
        raise web.HTTPNotFound(reason=f"the console has no file {request.match_info['path']}")
    return _send(path)


def add_to(app: web.Application) -> None:
    """Register the page and its files (after the API routes, which win for
    ``/console/api/``). They stay out of the OpenAPI description: files, not API."""
    app.router.add_get("/console", console_root)
    app.router.add_get("/console/", console_page)
    app.router.add_get("/console/{path:(?!api/).+}", console_file)


def is_asset(path: str) -> bool:
    """Whether ``path`` is one of the console's open files (not its API)."""
    return path in ("/console", "/console/") or (path.startswith("/console/") and not path.startswith("/console/api/"))

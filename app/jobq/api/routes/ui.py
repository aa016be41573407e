"""The dashboard: static files at /ui, and / sending a browser there.

The files hold no data, so they are served without a token; everything the page shows or
does, it asks of the public API (/v1/...) with the token the operator gives it. Not in the
OpenAPI document: these are pages, not operations."""

from __future__ import annotations

from functools import cache
from importlib import resources

from fastapi import APIRouter
from starlette.responses import RedirectResponse, Response

from jobq.domain.errors import NotFound

router = APIRouter(include_in_schema=False)

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}
# The page is small and changes with the service: a browser asks again after a minute.
_HEADERS = {
    "Cache-Control": "max-age=60",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "style-src 'self'; script-src 'self'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
}


@cache
def _files() -> dict[str, bytes]:
    folder = resources.files("jobq.api.ui")
    return {
        f.name: f.read_bytes() for f in folder.iterdir() if f.is_file() and any(f.name.endswith(ext) for ext in _TYPES)
    }


def _file(name: str) -> Response:
    body = _files().get(name)
    if body is None:
        raise NotFound(f"no dashboard file {name!r}")
    media = _TYPES[name[name.rindex(".") :]]
    return Response(body, media_type=media, headers=_HEADERS)


# The icon a browser asks for on every page it shows (the dashboard, /docs, /problems/...):
# public like the page, or once tokens exist each page logs a 401 in the console. An SVG is
# small and every current browser takes one as a favicon.
_FAVICON = (
    b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">'
    b'<rect width="32" height="32" rx="6" fill="#2457c5"/>'
    b'<rect x="7" y="8" width="18" height="4" rx="1" fill="#fff"/>'
    b'<rect x="7" y="14" width="18" height="4" rx="1" fill="#fff" opacity=".8"/>'
    b'<rect x="7" y="20" width="12" height="4" rx="1" fill="#fff" opacity=".6"/></svg>'
)


@router.get("/favicon.ico", name="ui_favicon")
async def ui_favicon() -> Response:
    return Response(_FAVICON, media_type="image/svg+xml", headers={**_HEADERS, "Cache-Control": "max-age=86400"})


@router.get("/", name="ui_root")
async def ui_root() -> Response:
    return RedirectResponse("/ui", status_code=307)


@router.get("/ui", name="ui_index")
async def ui_index() -> Response:
    return _file("index.html")


@router.get("/ui/{name}", name="ui_file")
async def ui_file(name: str) -> Response:
    return _file(name)

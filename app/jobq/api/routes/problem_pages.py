"""``GET /problems/{code}``: what every answer's ``type`` points at. A page on one error code
(its title, statuses, meaning and what to do), read from ``problems.KINDS``, as HTML for a
person or as JSON for a program (``Accept: application/json``). Public, like the probes: the
page of an error must be readable by a caller whose token was just refused."""

from __future__ import annotations

import html
import re

from fastapi import APIRouter, Request
from starlette.responses import HTMLResponse, Response

from jobq.api import render
from jobq.api.problems import KINDS, TYPE_BASE, Kind
from jobq.domain.errors import NotFound

router = APIRouter(include_in_schema=False)

_CODE_SPAN = re.compile(r"`([^`]+)`")


def _text(markdown: str) -> str:
    """HTML of our own table's sentences: escaped, with `code` spans kept."""
    return _CODE_SPAN.sub(r"<code>\1</code>", html.escape(markdown, quote=False))


def _page(code: str, kind: Kind) -> str:
    statuses = ", ".join(str(s) for s in kind.statuses)
    others = " ".join(f'<a href="{TYPE_BASE}{c}">{c}</a>' for c in KINDS if c != code)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>jobq: {code}</title>
<style>body{{font-family:sans-serif;max-width:42em;margin:2em auto;line-height:1.5}}
code{{background:#f3f3f3;padding:0 .2em}}</style></head>
<body>
<h1>{html.escape(kind.title)} <small><code>{code}</code></small></h1>
<p>HTTP status: <strong>{statuses}</strong>. The answer is <code>application/problem+json</code>
(RFC 9457) with <code>"code": "{code}"</code>.</p>
<h2>What it means</h2>
<p>{_text(kind.meaning)}</p>
<h2>What to do</h2>
<p>{_text(kind.action)}</p>
<p>Other codes: {others}. The API is described at <a href="/docs">/docs</a>.</p>
</body></html>
"""


def _wants_json(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return "json" in accept and "text/html" not in accept


@router.get("/problems/{code}", name="problem_page")
async def problem_page(code: str, request: Request) -> Response:
    kind = KINDS.get(code)
    if kind is None:
        raise NotFound(f"no error code {code!r}; the codes are {', '.join(KINDS)}")
    if _wants_json(request):
        return render.json_response({"type": TYPE_BASE + code, "code": code, "title": kind.title,
                                     "statuses": list(kind.statuses), "meaning": kind.meaning,
                                     "action": kind.action})
    return HTMLResponse(_page(code, kind))

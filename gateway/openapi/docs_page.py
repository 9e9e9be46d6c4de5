"""`GET /docs`: a page that renders this server's /openapi.json in the browser, and the mount
of its assets (`/docs/assets/...`).

Plain HTML, CSS and a JavaScript module served from the package (no CDN, no build step), so
the page works offline, like the web playground (gateway/playground/page.py), whose pattern
this follows. The page and its assets are open without the API key (gateway/http/auth.py):
they say nothing about the server. /openapi.json is not: the page asks for the key on a 401,
as the playground does, keeps it in the tab's sessionStorage (the same entry the playground
uses) and sends it as `Authorization: Bearer`.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

HERE = Path(__file__).parent
PAGE = HERE / "docs.html"
STATIC = HERE / "static"
DOCS_PATH = "/docs"  # open without the API key (gateway/http/auth.py)
ASSETS_PATH = "/docs/assets"  # likewise
# The page runs only its own script and styles and fetches only /openapi.json; its download
# link is a blob: URL made in the page.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}


async def docs_page(request: Request) -> FileResponse:
    """The page (HEAD gets its headers only)."""
    return FileResponse(PAGE, media_type="text/html; charset=utf-8", headers=HEADERS)


def docs_assets() -> Mount:
    """`/docs/assets/...`: the page's script and styles."""
    return Mount(ASSETS_PATH, app=StaticFiles(directory=STATIC), name="docs")

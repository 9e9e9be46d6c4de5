"""Serving the playground: which requests for `/` get the page, the page's response, and the
mount of its assets.

`GET /` answers API clients with a JSON description of the server (gateway/api/admin/root.py);
a browser gets the page instead. Browsers rank `text/html` above everything else, while SDKs,
curl and uptime probes send `*/*`, JSON or nothing, so ranking the two media types by the
Accept header's q-values tells them apart without guessing from the User-Agent.
"""

from __future__ import annotations

from pathlib import Path

from starlette.responses import FileResponse
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

HERE = Path(__file__).parent
PAGE = HERE / "index.html"
STATIC = HERE / "static"
ASSETS_PATH = "/playground"  # open without the API key (gateway/http/auth.py)
# The page runs only its own scripts and styles and talks only to this server; images and
# audio it shows are data: / blob: URLs made in the page.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; img-src 'self' data: blob:; media-src 'self' data: blob:; "
    "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


def prefers_html(accept: str | None) -> bool:
    """Whether an Accept header ranks `text/html` above `application/json`. A browser's does
    (`text/html` at q=1, JSON only through `*/*;q=0.8`); `*/*`, a JSON type or no header
    rank them equal or JSON first, which keeps the JSON."""
    if not accept:
        return False
    ranges = [r for r in (_media_range(part) for part in accept.split(",")) if r is not None]
    return _quality(ranges, "text", "html") > _quality(ranges, "application", "json")


def _media_range(part: str) -> tuple[str, str, float] | None:
    kind, *params = part.split(";")
    main, slash, sub = kind.strip().lower().partition("/")
    if not slash or not main or not sub:
        return None
    q = 1.0
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                q = min(max(float(value), 0.0), 1.0)
            except ValueError:
                q = 0.0
    return main, sub.strip(), q


def _quality(ranges: list[tuple[str, str, float]], main: str, sub: str) -> float:
    """The q of the most specific range that matches `main/sub` (RFC 9110, 12.5.1)."""
    best_specificity, best_q = -1, 0.0
    for range_main, range_sub, q in ranges:
        if (range_main, range_sub) == (main, sub):
            specificity = 2
        elif (range_main, range_sub) == (main, "*"):
            specificity = 1
        elif (range_main, range_sub) == ("*", "*"):
            specificity = 0
        else:
            continue
        if specificity > best_specificity:
            best_specificity, best_q = specificity, q
    return best_q


def page() -> FileResponse:
    """The page itself (HEAD gets its headers only)."""
    return FileResponse(
        PAGE,
        media_type="text/html; charset=utf-8",
        headers={
            "content-security-policy": CONTENT_SECURITY_POLICY,
            "x-content-type-options": "nosniff",
            "referrer-policy": "no-referrer",
            "cache-control": "no-cache",
            "vary": "Accept",
        },
    )


def assets() -> Mount:
    """`/playground/...`: the page's scripts, styles and icon."""
    return Mount(ASSETS_PATH, app=StaticFiles(directory=STATIC), name="playground")

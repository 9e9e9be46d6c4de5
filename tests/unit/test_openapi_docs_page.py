"""The API docs page (gateway/openapi/docs_page.py): served at /docs without the API key, with
a CSP, loading only its own assets (no CDN: it works offline), which are open too; the
document it renders, /openapi.json, stays behind the key."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser

import pytest
from starlette.routing import Route

from gateway.openapi.docs_page import ASSETS_PATH, PAGE, STATIC, docs_assets, docs_page
from tests.support.fake_engine import make_client


def client_with_docs(**overrides):
    """The app, with the docs routes added unless the app already has them."""
    client = make_client(**overrides)
    paths = {getattr(route, "path", None) for route in client.app.routes}
    if "/docs" not in paths:
        client.app.routes.append(Route("/docs", docs_page, methods=["GET", "HEAD"]))
    if ASSETS_PATH not in paths:
        client.app.routes.append(docs_assets())
    return client


class _Page(HTMLParser):
    """The page's external references and its inline code."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[tuple[str, str]] = []
        self.inline_scripts = 0
        self.style_attributes = 0
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if "style" in attributes or tag == "style":
            self.style_attributes += 1
        if any(name.startswith("on") for name in attributes):
            self.inline_scripts += 1
        if tag == "script":
            self._in_script = "src" not in attributes
            if "src" in attributes:
                self.urls.append((tag, attributes["src"]))
        if tag == "link" and "href" in attributes:
            self.urls.append((tag, attributes["href"]))

    def handle_data(self, data):
        if self._in_script and data.strip():
            self.inline_scripts += 1

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False


def test_the_page_is_served_without_the_key_with_a_csp():
    with client_with_docs(api_key="k") as client:
        page = client.get("/docs")
        head = client.head("/docs")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "'unsafe-inline'" not in csp
    assert "object-src 'none'" in csp and "frame-ancestors 'none'" in csp
    assert page.headers["x-content-type-options"] == "nosniff"
    assert head.status_code == 200 and head.content == b""


def test_the_page_loads_only_its_own_assets_and_they_are_open():
    with client_with_docs(api_key="k") as client:
        html = client.get("/docs").text
        parser = _Page()
        parser.feed(html)
        assert parser.inline_scripts == 0 and parser.style_attributes == 0
        assert {tag for tag, _ in parser.urls} == {"script", "link"}
        for _, url in parser.urls:
            assert "://" not in url and not url.startswith(("//", "/")), url
            response = client.get("/" + url)  # relative to /docs: from the root
            assert response.status_code == 200, url
        kinds = {p.suffix: client.get(f"{ASSETS_PATH}/{p.name}") for p in STATIC.iterdir()}
    assert "javascript" in kinds[".js"].headers["content-type"]
    assert "text/css" in kinds[".css"].headers["content-type"]


def test_nothing_on_the_page_comes_from_elsewhere():
    """No CDN, no web fonts: the page works offline."""
    for text in [PAGE.read_text(), *(p.read_text() for p in STATIC.iterdir())]:
        assert "http://" not in text and "https://" not in text
        assert "@import" not in text and "url(" not in text


def test_only_the_page_and_its_assets_are_open_and_the_document_is_not():
    with client_with_docs(api_key="k") as client:
        assert client.get(f"{ASSETS_PATH}/missing.js").status_code == 404
        assert client.get("/docs/other").status_code == 401
        assert client.get("/docsx").status_code == 401
        assert client.get("/openapi.json").status_code == 401
        assert client.get("/docs/", follow_redirects=False).status_code in (307, 404)


def test_the_page_fetches_the_document_with_the_key_it_asks_for():
    script = (STATIC / "docs.js").read_text()
    assert 'fetch("openapi.json"' in script  # relative: works under a proxy's prefix
    assert "Authorization: `Bearer ${key}`" in script
    # The playground's key code, so one sessionStorage entry serves both pages.
    assert 'import { apiKey, askForKey } from "../../playground/api.js"' in script
    playground = (STATIC.parent.parent / "playground" / "static" / "api.js").read_text()
    assert "export function askForKey" in playground and "export function apiKey" in playground
    assert ".innerHTML" not in script  # the document's text goes in as text


@pytest.mark.skipif(shutil.which("node") is None, reason="no node to check the script's syntax")
def test_the_script_parses():
    # As a module: it imports the playground's api.js.
    source = (STATIC / "docs.js").read_text()
    subprocess.run(
        ["node", "--input-type=module", "--check"], input=source, text=True, check=True,
        timeout=60,
    )  # fmt: skip

"""How the gateway serves the web playground (gateway/playground/): the page at `/` for
browsers only, its assets under /playground/ without the API key, the JSON for everyone else.
The page itself is tested in a browser: tests/browser/."""

from __future__ import annotations

import pytest

from gateway.playground.page import STATIC, prefers_html
from tests.support.fake_engine import make_client

BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,*/*;q=0.8"


@pytest.mark.parametrize(
    "accept",
    [BROWSER_ACCEPT, "text/html", "text/*, application/json;q=0.5", "TEXT/HTML;q=0.9, */*;q=0.1"],
)
def test_an_accept_header_that_ranks_html_first_prefers_the_page(accept):
    assert prefers_html(accept)


@pytest.mark.parametrize(
    "accept",
    [
        None,
        "",
        "*/*",
        "application/json",
        "application/json, text/html",  # equal: the JSON stays
        "text/html;q=0.5, application/json",
        "text/html;q=0, */*",
        "text/html;q=oops, */*;q=0.1",
        "garbage, ,;q=1",
    ],
)
def test_api_clients_accept_headers_keep_the_json(accept):
    assert not prefers_html(accept)


def test_a_browser_gets_the_page_at_the_base_url_without_a_key():
    with make_client(api_key="k") as client:
        page = client.get("/", headers={"accept": BROWSER_ACCEPT})
        head = client.head("/", headers={"accept": BROWSER_ACCEPT})
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="playground/app.js">' in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["vary"] == "Accept"
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-type"].startswith("text/html")


def test_api_clients_get_the_json_at_the_base_url_and_v1_stays_json_for_browsers():
    with make_client(api_key="k") as client:
        plain = client.get("/")
        v1 = client.get("/v1", headers={"accept": BROWSER_ACCEPT})
    assert plain.json()["object"] == "server" and plain.headers["vary"] == "Accept"
    assert v1.json()["object"] == "server"


@pytest.mark.parametrize("asset", sorted(p.name for p in STATIC.iterdir()))
def test_every_asset_is_served_without_the_key(asset):
    with make_client(api_key="k") as client:
        response = client.get(f"/playground/{asset}")
    assert response.status_code == 200, asset
    kind = {"js": "javascript", "css": "text/css", "svg": "image/svg+xml"}[asset.split(".")[-1]]
    assert kind in response.headers["content-type"]


def test_only_the_assets_are_open_and_nothing_outside_them_is_served():
    with make_client(api_key="k") as client:
        assert client.get("/playground/missing.js").status_code == 404
        assert client.get("/playground/../page.py").status_code in (401, 404)
        assert client.get("/playground/%2e%2e/page.py").status_code == 404
        assert client.get("/playgroundx").status_code == 401
        assert client.get("/v1/models").status_code == 401


def test_the_page_loads_nothing_from_elsewhere():
    """No CDN: every script, style and icon the page or its modules name is its own."""
    from gateway.playground.page import PAGE

    texts = [PAGE.read_text(), *(p.read_text() for p in STATIC.iterdir())]
    for text in texts:
        assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")
        assert "https://" not in text

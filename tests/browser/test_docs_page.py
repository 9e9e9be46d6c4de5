"""The API docs page (`GET /docs`, gateway/openapi/) in headless Chromium: it asks for the API
key the document needs, then shows every operation of the server's own /openapi.json, with the
request fields of the tables the gateway checks bodies against."""

from __future__ import annotations

import httpx

from tests.support.browser import Playground
from tests.support.server import API_KEY


def test_the_docs_page_asks_for_the_key_then_shows_every_operation(driver, playground_server):
    page = Playground(driver, playground_server.url)
    driver.get(f"{playground_server.url}/health")
    driver.execute_script("sessionStorage.clear()")
    driver.get(f"{playground_server.url}/docs")
    driver.get_log("browser")
    page.wait("const d = document.getElementById('key-dialog'); return d && d.open")
    page.find("#key-input").send_keys(API_KEY)
    page.js("document.getElementById('key-dialog').close('save')")
    page.wait("return document.body.dataset.ready === 'true'")
    document = httpx.get(
        f"{playground_server.url}/openapi.json", headers=playground_server.headers
    ).json()
    ids = {op["operationId"] for item in document["paths"].values() for op in item.values()}
    shown = set(
        page.js("return [...document.querySelectorAll('article.operation')].map(a => a.id)")
    )
    assert shown == ids
    chat = page.text("#createChatCompletion")
    assert "temperature" in chat and "messages" in chat and "/v1/chat/completions" in chat
    assert page.js("return sessionStorage.getItem('vomlx-api-key')") == API_KEY
    assert page.script_errors() == []

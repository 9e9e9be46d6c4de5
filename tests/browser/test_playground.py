"""The web playground end to end: headless Chromium on the page the gateway serves at `/`,
against the real server (tests/browser/conftest.py). What the page shows is checked against
what the API answers to the same request."""

from __future__ import annotations

import base64
import io
import json
import wave

import httpx
import pytest
from PIL import Image

from tests.support.server import API_KEY
from tests.support.stt_audio import duration

Keys = pytest.importorskip(
    "selenium.webdriver.common.keys", reason="selenium is not installed (pip install -e '.[dev]')"
).Keys

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def api(server, path: str, **kwargs) -> httpx.Response:
    kwargs.setdefault("timeout", 60)
    method = "POST" if ("json" in kwargs or "files" in kwargs) else "GET"
    response = httpx.request(method, f"{server.url}{path}", headers=server.headers, **kwargs)
    return response


def api_reply(server, body: dict) -> dict:
    """The API's non-streamed answer to `body` (the request the page sent, made whole)."""
    body = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
    response = api(server, "/v1/chat/completions", json=body)
    response.raise_for_status()
    return response.json()["choices"][0]


def send_chat(page, text: str) -> None:
    box = page.find("#chat-input")
    box.clear()
    box.send_keys(text, Keys.ENTER)


def wait_reply(page, n: int = 1) -> str:
    """The state ("done" or "error") of the n-th assistant reply once it has ended."""
    return page.wait(
        "const r = document.querySelectorAll('.msg.assistant')[arguments[0] - 1];"
        "return r && ['done', 'error'].includes(r.dataset.state) && r.dataset.state",
        n,
    )


def reply_text(page, n: int = 1) -> str:
    """The n-th assistant reply's rendered answer, as the page shows it."""
    return page.js(
        "return document.querySelectorAll('.msg.assistant .content')[arguments[0] - 1].innerText",
        n,
    )


def set_number(page, element_id: str, value) -> None:
    field = page.find(f"#{element_id}")
    field.clear()
    field.send_keys(str(value))


# -- the page and the key ---------------------------------------------------------------------


def test_api_clients_still_get_json_at_the_base_url(playground_server):
    for accept in (None, "*/*", "application/json"):
        headers = {"accept": accept} if accept else {}
        response = httpx.get(f"{playground_server.url}/", headers=headers, timeout=10)
        assert response.json()["object"] == "server", accept


def test_the_page_asks_for_the_api_key_and_then_shows_the_served_models(page, models, screenshot):
    page.open(key=None)
    page.wait("return document.getElementById('key-dialog').open")
    screenshot("api-key")
    page.find("#key-input").send_keys("not-the-key", Keys.ENTER)
    page.wait(
        "return document.getElementById('key-dialog').open &&"
        " document.getElementById('key-reason').textContent.includes('refused')"
    )
    page.find("#key-input").clear()
    page.find("#key-input").send_keys(API_KEY, Keys.ENTER)
    page.wait("return document.body.dataset.ready === 'true'")

    assert page.js("return sessionStorage.getItem('vomlx-api-key')") == API_KEY
    assert [r["status"] for r in page.requests("/v1/models")] == [401, 401, 200]
    tabs = page.js(
        "return [...document.querySelectorAll('#tabs [data-tab]')]"
        ".filter(b => !b.hidden).map(b => b.textContent)"
    )
    assert tabs == ["Chat", "Speech", "Transcribe", "Status"]
    options = "return [...document.getElementById(arguments[0]).options].map(o => o.value)"
    assert page.js(options, "chat-model") == [models["chat"]]
    assert page.js(options, "speech-model") == [models["speech"]]
    assert page.js(options, "transcribe-model") == [models["transcribe"]]


# -- chat ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_a_chat_reply_renders_the_text_and_reasoning_the_api_answers(
    page, playground_server, models, stream, screenshot
):
    expected = api_reply(
        playground_server,
        {
            "model": models["chat"],
            "messages": [{"role": "user", "content": "Hi there!"}],
            "temperature": 0,
        },
    )["message"]
    page.open(key=API_KEY)
    set_number(page, "chat-temperature", 0)
    if not stream:
        page.find("#chat-stream").click()
    send_chat(page, "Hi there!")
    assert wait_reply(page) == "done"

    (sent,) = page.requests("/v1/chat/completions")
    assert sent["json"]["messages"] == [{"role": "user", "content": "Hi there!"}]
    assert (sent["json"]["stream"], sent["json"]["temperature"]) == (stream, 0)
    media_type = "text/event-stream" if stream else "application/json"
    assert sent["status"] == 200 and sent["contentType"].startswith(media_type)
    assert reply_text(page) == expected["content"]
    # the reasoning is there, folded away once the answer came
    assert page.text(".msg.assistant .reasoning-text") == expected["reasoning_content"]
    assert (
        page.js("return document.querySelector('.msg.assistant details.reasoning').open") is False
    )
    assert page.find(".msg.assistant .meta").text.startswith("stop · ")
    if stream:
        page.find(".msg.assistant details.reasoning summary").click()  # unfolded for the picture
        screenshot("chat")


def test_the_next_turn_sends_the_conversation_so_far(page, playground_server):
    page.open(key=API_KEY)
    set_number(page, "chat-temperature", 0)
    send_chat(page, "First question")
    wait_reply(page, 1)
    send_chat(page, "Second question")
    assert wait_reply(page, 2) == "done"

    first_answer = reply_text(page, 1)
    second = page.requests("/v1/chat/completions")[1]["json"]
    assert second["messages"] == [
        {"role": "user", "content": "First question"},
        {"role": "assistant", "content": first_answer},
        {"role": "user", "content": "Second question"},
    ]
    expected = api_reply(playground_server, second)["message"]["content"]
    assert reply_text(page, 2) == expected


def test_the_system_prompt_and_sampling_controls_go_into_the_request(page):
    page.open(key=API_KEY)
    page.find("#chat-system").send_keys("You answer in one word.")
    for element_id, value in [
        ("chat-temperature", 0.5),
        ("chat-top-p", 0.9),
        ("chat-max-tokens", 3),
        ("chat-seed", 7),
    ]:
        set_number(page, element_id, value)
    send_chat(page, "Hi")
    assert wait_reply(page) == "done"

    sent = page.requests("/v1/chat/completions")[0]["json"]
    assert sent["messages"][0] == {"role": "system", "content": "You answer in one word."}
    assert (sent["temperature"], sent["top_p"], sent["max_tokens"], sent["seed"]) == (
        0.5,
        0.9,
        3,
        7,
    )
    assert page.find(".msg.assistant .meta").text.startswith("length · 3 tokens")


def test_a_tool_call_shows_as_a_card_and_its_result_continues_the_conversation(
    page, playground_server, screenshot
):
    page.open(key=API_KEY)
    # greedy: under the forced call's grammar the scripted model samples between {} and
    # {"city": ""} at its default temperature
    set_number(page, "chat-temperature", 0)
    page.find(".tools-config summary").click()
    page.js(
        "document.getElementById('chat-tools').value = arguments[0];"
        "document.getElementById('chat-tool-choice').value = 'required';",
        json.dumps([WEATHER_TOOL]),
    )
    send_chat(page, "What is the weather in Paris?")
    assert wait_reply(page) == "done"

    sent = page.requests("/v1/chat/completions")[0]["json"]
    assert sent["tools"] == [WEATHER_TOOL] and sent["tool_choice"] == "required"
    (call,) = api_reply(playground_server, sent)["message"]["tool_calls"]
    card = page.find(".msg.assistant .tool-call")
    assert (
        card.find_element("css selector", ".tool-name").text
        == f"tool call {call['function']['name']}"
    )
    assert card.find_element("css selector", ".tool-args").text == call["function"]["arguments"]
    assert page.find(".msg.assistant .meta").text.startswith("tool_calls · ")

    page.js("document.getElementById('chat-tool-choice').value = 'auto'")
    card.find_element("css selector", ".tool-result input").send_keys("Sunny, 21 °C", Keys.ENTER)
    assert wait_reply(page, 2) == "done"
    follow_up = page.requests("/v1/chat/completions")[1]["json"]
    assistant, tool = follow_up["messages"][1:]
    assert assistant["tool_calls"][0]["function"]["name"] == "get_weather"
    assert tool == {
        "role": "tool",
        "tool_call_id": assistant["tool_calls"][0]["id"],
        "content": "Sunny, 21 °C",
    }
    expected = api_reply(playground_server, follow_up)["message"]["content"]
    assert reply_text(page, 2) == expected
    screenshot("tool-call")


def test_images_attach_as_data_urls_only_for_models_that_take_images(
    page, playground_server, models, tmp_path
):
    page.open(key=API_KEY)
    assert page.js("return document.getElementById('chat-attach').hidden") is True

    # The served chat model takes no images; the page is told it does, so the request goes
    # out with the image and the server's refusal is what the reply shows.
    page.open(key=API_KEY, models_patch={models["chat"]: {"capabilities": ["chat", "image_in"]}})
    assert page.js("return document.getElementById('chat-attach').hidden") is False
    png = tmp_path / "red.png"
    Image.new("RGB", (8, 8), (220, 30, 30)).save(png)
    page.find("#chat-image-input").send_keys(str(png))
    page.wait("return document.querySelectorAll('#chat-attachments img').length === 1")
    send_chat(page, "What color is this?")
    assert wait_reply(page) == "error"

    sent = page.requests("/v1/chat/completions")[0]["json"]
    data_url = "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode()
    assert sent["messages"][0]["content"] == [
        {"type": "text", "text": "What color is this?"},
        {"type": "image_url", "image_url": {"url": data_url}},
    ]
    refusal = api(playground_server, "/v1/chat/completions", json=sent)
    assert refusal.status_code == 400
    shown = page.find(".msg.assistant .error").text
    assert shown == f"400: {refusal.json()['error']['message']}"
    assert page.js("return document.querySelectorAll('.msg.user img').length") == 1


def test_markdown_is_rendered_from_escaped_text(page):
    page.open(key=API_KEY)
    cases = {
        "<script>alert(1)</script> & <b>x</b>": "<p>&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;b&gt;x&lt;/b&gt;</p>",
        "**bold** and *it* and `a<b>`": "<p><strong>bold</strong> and <em>it</em> and <code>a&lt;b&gt;</code></p>",
        "```python\nif a < b:\n    print('**no**')\n```": '<pre><code class="language-python">if a &lt; b:\n    print(&#39;**no**&#39;)</code></pre>',
        "- one\n- **two**\n\n1. first\n2. second": "<ul><li>one</li><li><strong>two</strong></li></ul><ol><li>first</li><li>second</li></ol>",
        "[docs](https://example.com/a?b=1&c=2)": '<p><a href="https://example.com/a?b=1&amp;c=2" target="_blank" rel="noopener noreferrer">docs</a></p>',
        "[x](javascript:alert(1)) [y](data:text/html,hi)": "<p>[x](javascript:alert(1)) [y](data:text/html,hi)</p>",
        '[q](https://e.com/"onmouseover="alert(1))': '<p><a href="https://e.com/&quot;onmouseover=&quot;alert(1" target="_blank" rel="noopener noreferrer">q</a>)</p>',
        "```\nstill streaming <i>": "<pre><code>still streaming &lt;i&gt;</code></pre>",
        "# Title\nline one\nline two": "<h1>Title</h1><p>line one<br>line two</p>",
    }
    rendered = page.driver.execute_async_script(
        "const [cases, done] = arguments;"
        "import('./playground/markdown.js').then(m =>"
        " done(Object.fromEntries(Object.keys(cases).map(k => [k, m.renderMarkdown(k)]))));",
        cases,
    )
    assert rendered == cases


# -- speech -------------------------------------------------------------------------------------


def test_speech_plays_as_long_as_the_wav_the_api_returns(
    page, playground_server, models, tmp_path, screenshot
):
    page.open(key=API_KEY)
    page.find("#tab-speech").click()
    page.wait("return document.getElementById('panel-speech').dataset.ready")
    page.find("#speech-input").send_keys("Hello from the playground.")
    set_number(page, "speech-seed", 3)
    page.find("#speech-go").click()
    seconds = page.wait(
        "const a = document.getElementById('speech-audio');"
        "return a.readyState >= 1 && Number.isFinite(a.duration) && a.duration"
    )

    (sent,) = page.requests("/v1/audio/speech")
    assert sent["json"] == {
        "model": models["speech"],
        "input": "Hello from the playground.",
        "voice": page.js("return document.getElementById('speech-voice').options[0].value"),
        "response_format": "wav",
        "seed": 3,
    }
    wav = tmp_path / "api.wav"
    wav.write_bytes(api(playground_server, "/v1/audio/speech", json=sent["json"]).content)
    assert seconds == pytest.approx(duration(wav), abs=0.01)
    download = page.find("#speech-download")
    assert download.get_attribute("href").startswith("blob:")
    assert download.get_attribute("download") == "speech.wav"
    page.wait("return document.getElementById('speech-status').textContent.includes('s of audio')")
    screenshot("speech")


# -- transcription ----------------------------------------------------------------------------


def test_an_uploaded_recording_shows_the_transcript_the_api_gives(
    page, playground_server, models, speech_file
):
    expected = api(
        playground_server,
        "/v1/audio/transcriptions",
        data={"model": models["transcribe"]},
        files={"file": ("hello.wav", speech_file.read_bytes(), "audio/wav")},
    ).json()["text"]
    page.open(key=API_KEY)
    page.find("#tab-transcribe").click()
    page.find("#transcribe-file").send_keys(str(speech_file))
    page.wait("return !document.getElementById('transcribe-result').hidden")

    assert page.text("#transcript") == expected
    (sent,) = page.requests("/v1/audio/transcriptions")
    assert base64.b64decode(sent["form"]["file"]["base64"]) == speech_file.read_bytes()
    assert sent["form"]["model"] == models["transcribe"]


def test_a_microphone_recording_is_sent_as_wav_and_its_transcript_shown(
    page, playground_server, models, screenshot
):
    page.open(key=API_KEY)
    page.find("#tab-transcribe").click()
    page.find("#transcribe-record").click()
    page.wait("return document.getElementById('transcribe-record').classList.contains('recording')")
    page.js("return new Promise(r => setTimeout(r, 1500))")
    page.find("#transcribe-record").click()
    page.wait("return !document.getElementById('transcribe-result').hidden", timeout=60)

    (sent,) = page.requests("/v1/audio/transcriptions")
    assert sent["form"]["file"]["name"] == "recording.wav"
    recording = base64.b64decode(sent["form"]["file"]["base64"])
    with wave.open(io.BytesIO(recording)) as wav:
        assert (wav.getnchannels(), wav.getframerate(), wav.getsampwidth()) == (1, 16000, 2)
        assert wav.getnframes() > 8000  # the fake microphone, for well over half a second
    expected = api(
        playground_server,
        "/v1/audio/transcriptions",
        data={"model": models["transcribe"]},
        files={"file": ("recording.wav", recording, "audio/wav")},
    ).json()["text"]
    assert page.text("#transcript") == expected
    screenshot("transcribe")


# -- status -------------------------------------------------------------------------------------


def test_the_status_panel_shows_health_and_the_worker_counters(page, playground_server, screenshot):
    page.open(key=API_KEY)
    page.find("#tab-status").click()
    page.wait("return document.getElementById('panel-status').dataset.refreshed")

    health = playground_server.health().json()
    stats = playground_server.stats()
    value = "return document.querySelector(`dd[data-key='${arguments[0]}']`)?.textContent"
    assert page.js(value, "state") == "ready"
    assert page.js(value, "worker_pid") == str(health["worker_pid"])
    assert page.js(value, "requests served") == str(stats["requests_total"])
    assert page.js(value, "tokens generated") == str(stats["tokens_generated"])
    assert page.find("#health-badge").text == "ready"
    screenshot("status")

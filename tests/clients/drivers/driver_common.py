"""What the Python drivers share. A driver runs in the clients' own venv (not the server's),
reads the server from VOMLX_URL / VOMLX_API_KEY / VOMLX_MODEL, runs its cases (or the ones named
on the command line) and prints one JSON line: case -> {"ok", "seconds", what it saw | "error"}.
The tests in tests/clients/ assert on that line; a driver asserts nothing itself."""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

URL = os.environ["VOMLX_URL"]  # http://127.0.0.1:PORT
API_KEY = os.environ["VOMLX_API_KEY"]
MODEL = os.environ["VOMLX_MODEL"]
EMBEDDING_MODEL = os.environ.get("VOMLX_EMBEDDING_MODEL", "")  # served next to MODEL
EMBED_TEXTS = ["What is the capital of France?", "Paris is the capital of France."]
PROMPT = "Say hello."
WEATHER_PROMPT = "What is the weather in Paris?"
TOOL_RESULT = "Sunny, 21 degrees."
WEATHER_PARAMETERS = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "The city"}},
    "required": ["city"],
}
# Chat Completions' tool shape (LiteLLM, the openai SDK).
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": WEATHER_PARAMETERS,
    },
}


def run(cases: dict[str, Callable[[], dict[str, Any]]]) -> None:
    chosen = sys.argv[1:] or list(cases)
    results: dict[str, dict[str, Any]] = {}
    for name in chosen:
        started = time.monotonic()
        try:
            result = {"ok": True, **cases[name]()}
        except Exception:
            result = {"ok": False, "error": traceback.format_exc()[-4000:]}
        result["seconds"] = round(time.monotonic() - started, 2)
        results[name] = result
    sys.stdout.flush()
    print(json.dumps(results, default=str))

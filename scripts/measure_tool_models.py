"""Which chat model can be the agent-capable default: tool calls, answers and speed, measured.

For each model given (a checkpoint directory or a name of `vllm-omni-mlx models list`), serves
it (`vllm-omni-mlx serve MODEL --dtype float32`) and, greedily, with two tools declared
(`get_weather`, `read_file`):

- calls: six requests that need one tool; counted right when the reply is one call of the
  right tool with the right argument;
- results: three conversations that end with that call's result; counted right when the reply
  is text (no call) that uses the result (holds its key word): an agent's loop ends there;
- restraint: three questions no tool helps with; counted right when the reply is text holding
  the answer (no call);
then the capital of France without tools, and a 64-token greedy decode (its tok/s includes a
short prefill). Prints a markdown table (docs/models.md, "The embedded default").

    python scripts/measure_tool_models.py qwen2.5-coder-0.5b qwen2.5-coder-1.5b smollm2-135m
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

CLI = str(Path(sys.executable).with_name("vllm-omni-mlx"))
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "read_file", "description": "Read a file from disk",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                       "required": ["path"]}}},
]  # fmt: skip
# (request, the tool, the argument's value it must carry)
CALLS = [
    ("What's the weather like in Paris?", "get_weather", "Paris"),
    ("Is it raining in Tokyo right now?", "get_weather", "Tokyo"),
    ("What is the weather in Berlin today?", "get_weather", "Berlin"),
    ("Show me the contents of setup.py.", "read_file", "setup.py"),
    ("Open the file src/main.rs for me.", "read_file", "src/main.rs"),
    ("Read README.md please.", "read_file", "README.md"),
]
# (request, the call made, its result, a word the answer must use)
RESULTS = [
    ("What's the weather like in Paris?", "get_weather", {"city": "Paris"}, "18 C, sunny", "18"),
    ("Is it raining in Tokyo right now?", "get_weather", {"city": "Tokyo"},
     "light rain, 12 C", "rain"),
    ("Read README.md please.", "read_file", {"path": "README.md"},
     "# Demo\nThis project prints hello.", "hello"),
]  # fmt: skip
# (question no tool helps with, a word the answer must hold)
RESTRAINT = [
    ("What is the capital of France?", "Paris"),
    ("What is 12 times 12?", "144"),
    ("Write a Python function that adds two numbers.", "def "),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def chat(url: str, model: str, messages: list[dict], **fields: object) -> dict[str, Any]:
    body = {"model": model, "temperature": 0, "messages": messages, **fields}
    reply = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=900).json()
    return reply["choices"][0]["message"]


def ask(content: str) -> list[dict]:
    return [{"role": "user", "content": content}]


def right_call(message: dict, tool: str, value: str) -> bool:
    calls = message.get("tool_calls") or []
    if len(calls) != 1 or calls[0]["function"]["name"] != tool:
        return False
    return value in json.loads(calls[0]["function"]["arguments"]).values()


def text_with(message: dict, word: str) -> bool:
    return not message.get("tool_calls") and word.lower() in (message.get("content") or "").lower()


def after_result(request: str, tool: str, arguments: dict, result: str) -> list[dict]:
    call = {"id": "call_1", "type": "function",
            "function": {"name": tool, "arguments": json.dumps(arguments)}}  # fmt: skip
    return [
        *ask(request),
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": result},
    ]


def measure(model_arg: str) -> dict[str, Any]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [CLI, "serve", model_arg, "--port", str(port), "--dtype", "float32"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(3600):
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        model = httpx.get(f"{url}/v1/models").json()["data"][0]["id"]
        started = time.perf_counter()
        calls = sum(
            right_call(chat(url, model, ask(request), tools=TOOLS, max_tokens=80), tool, value)
            for request, tool, value in CALLS
        )
        call_s = (time.perf_counter() - started) / len(CALLS)
        results = sum(
            text_with(
                chat(url, model, after_result(*case[:4]), tools=TOOLS, max_tokens=60), case[4]
            )
            for case in RESULTS
        )
        restraint = sum(
            text_with(chat(url, model, ask(question), tools=TOOLS, max_tokens=60), word)
            for question, word in RESTRAINT
        )
        capital = chat(url, model, ask("What is the capital of France?"), max_tokens=30)["content"]
        chat(url, model, ask("Count from one to five."), max_tokens=4)  # warm
        started = time.perf_counter()
        body = {"model": model, "temperature": 0, "max_tokens": 64,
                "messages": ask("Write a long story about the sea.")}  # fmt: skip
        reply = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=900).json()
        tok_s = reply["usage"]["completion_tokens"] / (time.perf_counter() - started)
        return {"model": model, "calls": f"{calls} / {len(CALLS)}",
                "results": f"{results} / {len(RESULTS)}",
                "restraint": f"{restraint} / {len(RESTRAINT)}", "call_s": call_s,
                "capital": capital, "tok_s": tok_s}  # fmt: skip
    finally:
        server.terminate()
        server.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", help="checkpoint directories or model names")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    print(
        "| model | right call | answers from the result | no call when none helps "
        "| s per call request | capital of France | decode tok/s |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for model in args.models:
        row = measure(model)
        print(
            f"| {row['model']} | {row['calls']} | {row['results']} | {row['restraint']} "
            f"| {row['call_s']:.1f} | {row['capital']} | {row['tok_s']:.1f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

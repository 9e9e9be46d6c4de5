"""The agent session's `claude_code` variant on the Anthropic Messages API
(scripts/bench_agent_session.py): its OpenAI-shaped turns as the `/v1/messages` body Claude
Code sends, and one streamed turn's TTFT and cache reads.

Claude Code's first system block is its attribution line,
`x-anthropic-billing-header: cc_version=...; cc_entrypoint=cli; cch=<hash>;`, whose `cch` the
builds that sign requests recompute for every request (a hash of the body): the line changes
every turn.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

ATTRIBUTION = "x-anthropic-billing-header: cc_version=2.1.332.1c9; cc_entrypoint=cli; cch={:05x};"


def attribution(turn: int) -> str:
    """The attribution line of request `turn` (a different `cch` every request)."""
    return ATTRIBUTION.format((turn * 0x9E3779B1) & 0xFFFFF)


def anthropic_body(model: str, messages: list[dict], tools: list[dict], max_tokens: int) -> dict:
    """The Messages request for OpenAI-shaped `messages`: the system message as text blocks
    (its first line, the attribution line, a block of its own, as Claude Code sends it),
    assistant tool calls as `tool_use` blocks (reasoning as a `thinking` block), tool results
    as `tool_result` blocks in user turns."""
    system, out = [], []
    for message in messages:
        role = message["role"]
        if role == "system":
            first, _, rest = message["content"].partition("\n")
            system += [{"type": "text", "text": first}, {"type": "text", "text": rest}]
        elif role == "user":
            out.append({"role": "user", "content": [{"type": "text", "text": message["content"]}]})
        elif role == "assistant":
            blocks: list[dict[str, Any]] = []
            if message.get("reasoning_content"):
                blocks.append({"type": "thinking", "thinking": message["reasoning_content"],
                               "signature": ""})  # fmt: skip
            if message.get("content"):
                blocks.append({"type": "text", "text": message["content"]})
            for call in message.get("tool_calls") or []:
                blocks.append({"type": "tool_use", "id": call["id"],
                               "name": call["function"]["name"],
                               "input": json.loads(call["function"]["arguments"])})  # fmt: skip
            out.append({"role": "assistant", "content": blocks})
        else:  # tool: a result block in a user turn (one user turn for consecutive results)
            block = {"type": "tool_result", "tool_use_id": message["tool_call_id"],
                     "content": message["content"]}  # fmt: skip
            if out and out[-1]["role"] == "user" and out[-1]["content"][0]["type"] == "tool_result":
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
    tools = [{"name": t["function"]["name"], "description": t["function"]["description"],
              "input_schema": t["function"]["parameters"]} for t in tools]  # fmt: skip
    body = {"model": model, "max_tokens": max_tokens, "system": system, "messages": out,
            "tools": tools, "temperature": 0, "stream": True}  # fmt: skip
    if not tools:
        del body["tools"]
    return body


def anthropic_turn(client: httpx.Client, body: dict) -> dict:
    """One streamed `/v1/messages` request: TTFT (the first content delta or tool_use block),
    its prompt tokens and those read from the cache (message_start's usage)."""
    start = time.perf_counter()
    ttft, usage, text = None, {}, []
    headers = {"anthropic-version": "2023-06-01"}
    with client.stream("POST", "/v1/messages", json=body, headers=headers) as response:
        if response.status_code != 200:
            raise RuntimeError(f"{response.status_code}: {response.read()[:300]!r}")
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            event = json.loads(line[6:])
            kind = event.get("type")
            delta = event.get("delta") or {}
            text.append(delta.get("text") or delta.get("partial_json") or "")
            if kind == "message_start":
                usage = dict(event["message"]["usage"])
            elif kind == "message_delta":  # a server may count the prompt only at the end
                usage.update({k: v for k, v in (event.get("usage") or {}).items() if v})
            started_tool = kind == "content_block_start" and (
                event["content_block"]["type"] == "tool_use"
            )
            if ttft is None and (kind == "content_block_delta" or started_tool):
                ttft = time.perf_counter() - start
    total = time.perf_counter() - start
    cached = usage.get("cache_read_input_tokens")
    prompt = sum(usage.get(k) or 0 for k in
                 ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"))  # fmt: skip
    return {"ttft_s": ttft if ttft is not None else total, "e2e_s": total,
            "prompt_tokens": prompt or None, "cached_tokens": cached,
            "completion_tokens": usage.get("output_tokens"), "text": "".join(text)}  # fmt: skip

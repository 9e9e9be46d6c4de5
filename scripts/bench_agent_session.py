"""Agent sessions: a coding agent's conversation replayed against OpenAI-compatible servers,
turn by turn, with the rewrites real clients make; TTFT and prompt tokens read from cache per
turn, and the whole session's time, against direct mlx-lm prefilling only what changed.

    python -m scripts.bench_agent_session [--size 20m-64k] [--prompt-tokens 25000] [--turns 10]
        [--sides ours,mlx_lm.server,vllm-mlx,direct] [--vllm-mlx /tmp/vllm-mlx-venv/bin/vllm-mlx]
        [--openblas-threads 1] [--json out.json]

The session (deterministic, seeded): a system prompt and `--tools` tool definitions of about
`--prompt-tokens` tokens in all (what Claude Code or Codex sends first), one user request,
then `--turns` turns, each the assistant's tool call and its result (200 to 2,000 tokens),
the request sent again with everything so far (`max_tokens` 8, greedy). With `--results code`
each result is a 40-line Python file and the request asks for each file back with a function
renamed: the answers then quote the context, as an agent's edits and file writes do, which is
where a server's speculation (prompt lookup) pays; give `--max-tokens` room for a file (~450).
`--tool-choice none` keeps the tools in the prompt but the answers text, so no server's tool
parser ends or reshapes one (a server that stops at its first parsed call does less work);
`--omit-tools` sends no tool definitions at all (the history's calls and results stay), for
servers that drop the tools from the prompt under `tool_choice: none`. Every side gets the
very same messages (a replay: the assistant turns are the script's, not the model's). Four
variants, each a session of its own (a salt in the system prompt's first line, so no
variant reuses another's cache):

- `append`: the history only grows;
- `thinking_dropped`: each assistant turn carries `reasoning_content` while it is the last
  one, and loses it in the next request (Anthropic's context management clearing thinking);
- `system_changes`: the system prompt's first line (a timestamp) changes every request;
- `results_cleared`: tool results more than 3 turns old become "[cleared]" (Claude Code's
  tool-result clearing);
- `claude_code`: the system prompt starts with Claude Code's attribution line, whose `cch`
  changes every request (scripts/agent_session_anthropic.py). Sent as Claude Code sends it,
  on the Anthropic Messages API, to the sides that have one (ours, vllm-mlx); mlx_lm.server
  gets the OpenAI request a translating proxy would make (the line in the system message);
  `direct` prefills the prompt without the line (what ours templates);
- `pasted`: no tool calls: each turn the user pastes the next result and the assistant's
  earlier answers are their right answers (with `--results code`: each file renamed, whole, as
  in Aider's whole-file edits), so every server's answer is text (no parser reshapes or ends
  it) and, greedy, the same.

Per turn: TTFT (the first streamed chunk with content or a tool call), the prompt's tokens,
the tokens the server says it read from its cache (`usage.prompt_tokens_details.cached_tokens`;
"-" where a server does not say), and for `direct` the tokens it could reuse (the common prefix
with what its cache held: the most any prefix cache can reuse). The sides run one after the
other (each alone on the machine), under one BLAS environment (scripts/bench_sides.py).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from scripts.agent_session_anthropic import anthropic_body, anthropic_turn, attribution
from scripts.bench_sides import (
    DirectSide,
    free_port,
    mlx_lm_server,
    ours,
    side_env,
    vllm_mlx,
)
from scripts.bench_speculation import FUNCTIONS, source_file
from worker.tiny_models import ensure_checkpoint

VARIANTS = (
    "append", "thinking_dropped", "system_changes", "results_cleared", "claude_code", "pasted",
)  # fmt: skip
ANTHROPIC_SIDES = ("ours", "vllm-mlx")  # the sides with a Messages API
WORDS = (
    "file function module test build error value change config request response server "
    "client cache token model stream parse check return import class method string list "
    "object field path line branch commit review patch deploy worker queue thread lock "
    "memory index search replace refactor rename format lint type schema handler route"
).split()
KEEP_RESULTS = 3


def prose(rng: random.Random, words: int) -> str:
    out, sentence = [], []
    for _ in range(words):
        sentence.append(rng.choice(WORDS))
        if len(sentence) >= rng.randint(8, 16):
            out.append(" ".join(sentence).capitalize() + ".")
            sentence = []
    return " ".join(out + ([" ".join(sentence) + "."] if sentence else []))


def tool_definitions(rng: random.Random, count: int, words: int) -> list[dict]:
    tools = []
    for i in range(count):
        properties = {
            f"arg_{j}": {"type": rng.choice(["string", "integer", "boolean"]),
                         "description": prose(rng, words // 8)}
            for j in range(4)
        }  # fmt: skip
        tools.append({"type": "function", "function": {
            "name": f"tool_{i}_{rng.choice(WORDS)}", "description": prose(rng, words // 2),
            "parameters": {"type": "object", "properties": properties,
                           "required": list(properties)[:2]},
        }})  # fmt: skip
    return tools


class Session:
    """The scripted session: its tools and, per variant, the messages of every turn."""

    def __init__(self, seed: int, prompt_words: int, tools: int, turns: int,
                 code: bool = False) -> None:  # fmt: skip
        rng = random.Random(seed)
        self.tools = tool_definitions(rng, tools, prompt_words // (2 * tools))
        self.system = prose(rng, prompt_words // 2)
        self.request = "Fix the failing test in the parser module and explain the change."
        if code:
            self.request = (
                "Rename the function `parse_header` to `read_header` everywhere. After each "
                "file a tool returns, output that whole file with the rename, and nothing else."
            )  # `pasted` sends the files as user messages, after this same request
        self.calls, self.results, self.thoughts = [], [], []
        for k in range(turns):
            tool = rng.choice(self.tools)["function"]
            self.calls.append({"id": f"call_{k}", "type": "function", "function": {
                "name": tool["name"],
                "arguments": json.dumps({"arg_0": rng.choice(WORDS), "arg_1": k}),
            }})  # fmt: skip
            if code:
                functions = rng.sample(FUNCTIONS, len(FUNCTIONS))
                self.results.append(f"```python\n{source_file(functions)}```")
            else:
                self.results.append(prose(rng, rng.randint(150, 1500)))
            self.thoughts.append(prose(rng, 60))

    def turns(self, variant: str, salt: str, attributed: bool = True) -> list[list[dict]]:
        return [self.messages(variant, salt, k, attributed) for k in range(len(self.calls) + 1)]

    def messages(self, variant: str, salt: str, upto: int, attributed: bool = True) -> list[dict]:
        first_line = f"Session {salt}."
        if variant == "system_changes":
            first_line += f" Current time: 2026-12-01T10:{upto:02d}:00Z."
        if variant == "claude_code" and attributed:
            first_line = f"{attribution(upto)}\n{first_line}"
        messages: list[dict] = [
            {"role": "system", "content": f"{first_line}\n{self.system}"},
            {"role": "user", "content": self.request},
        ]
        if variant == "pasted":
            for k in range(upto):
                answer = self.results[k - 1].replace("parse_header", "read_header")
                messages += [{"role": "assistant",
                              "content": answer if k else "Send the first file."},
                             {"role": "user", "content": self.results[k]}]  # fmt: skip
            return messages
        for k in range(upto):
            assistant: dict[str, Any] = {"role": "assistant", "content": "",
                                         "tool_calls": [self.calls[k]]}  # fmt: skip
            if variant == "thinking_dropped" and k == upto - 1:
                assistant["reasoning_content"] = self.thoughts[k]
            result = self.results[k]
            if variant == "results_cleared" and k < upto - KEEP_RESULTS:
                result = "[cleared]"
            messages += [assistant, {"role": "tool", "tool_call_id": f"call_{k}",
                                     "content": result}]  # fmt: skip
        return messages


def server_turn(
    client: httpx.Client, model: str, messages: list, tools: list, tokens: int, choice: str | None
) -> dict:
    body = {"model": model, "messages": messages, "tools": tools, "max_tokens": tokens,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}  # fmt: skip
    if not tools:
        del body["tools"]
    if choice is not None:
        body["tool_choice"] = choice
    start = time.perf_counter()
    ttft, usage, text = None, None, []
    with client.stream("POST", "/v1/chat/completions", json=body) as response:
        if response.status_code != 200:
            raise RuntimeError(f"{response.status_code}: {response.read()[:300]!r}")
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            event = json.loads(line[6:])
            delta = (event.get("choices") or [{}])[0].get("delta") or {}
            text.append(delta.get("content") or "")
            text += [(c.get("function") or {}).get("arguments") or "" for c in
                     delta.get("tool_calls") or []]  # fmt: skip
            if ttft is None and (delta.get("content") or delta.get("tool_calls")
                                 or delta.get("reasoning_content") or delta.get("reasoning")):  # fmt: skip
                ttft = time.perf_counter() - start
            usage = event.get("usage") or usage
    total = time.perf_counter() - start
    details = (usage or {}).get("prompt_tokens_details") or {}
    return {"ttft_s": ttft if ttft is not None else total, "e2e_s": total,
            "prompt_tokens": (usage or {}).get("prompt_tokens"),
            "completion_tokens": (usage or {}).get("completion_tokens"),
            "cached_tokens": details.get("cached_tokens"), "text": "".join(text)}  # fmt: skip


def run_server(
    side: Any, session: Session, variants: list[str], tokens: int, choice: str | None = None
) -> dict:
    out = {}
    with httpx.Client(base_url=side.url, timeout=1800) as client:
        model = side.model
        if model == "auto":  # the id the server lists
            model = client.get("/v1/models").json()["data"][0]["id"]
        for variant in variants:
            anthropic = variant == "claude_code" and side.name in ANTHROPIC_SIDES
            started = time.perf_counter()
            rows = []
            for messages in session.turns(variant, variant):
                if anthropic:
                    body = anthropic_body(model, messages, session.tools, tokens)
                    if choice is not None:
                        body["tool_choice"] = {"type": choice}
                    rows.append(anthropic_turn(client, body))
                else:
                    rows.append(server_turn(client, model, messages, session.tools, tokens, choice))
            out[variant] = {"turns": rows, "session_s": time.perf_counter() - started}
    return out


def run_direct(direct: DirectSide, session: Session, variants: list[str], tokens: int) -> dict:
    out = {}
    for variant in variants:
        started = time.perf_counter()
        turns = session.turns(variant, variant, attributed=False)  # the ideal: no such line
        result = direct.call("session", turns=turns,
                             tools=session.tools, max_tokens=tokens)  # fmt: skip
        out[variant] = {"turns": result["turns"], "session_s": time.perf_counter() - started}
    return out


TOKENS_PER_WORD = 1.43  # the tiny checkpoints' BPE on this prose and JSON, chat template included


def prompt_words(path: str, args: argparse.Namespace) -> int:
    """Words of system prompt and tools for about `--prompt-tokens` tokens (measured with the
    tiny qwen3 tokenizer: 17,107 tokens for 12,000 words; the first turn's count is reported)."""
    return int(args.prompt_tokens / TOKENS_PER_WORD)


def start_side(name: str, args: argparse.Namespace, path: str, env: dict, logs: Path) -> Any:
    if name == "direct":
        return DirectSide(path, env, logs)
    port = free_port()
    if name == "ours":
        side = ours(path, port, args.blas, logs, 8)
    elif name == "mlx_lm.server":
        side = mlx_lm_server(path, port, logs)
    else:
        side = vllm_mlx(args.vllm_mlx, path, port, logs)
    side.start(env, port)
    side.wait_ready()
    return side


def report(results: dict, variants: list[str]) -> None:
    for variant in variants:
        print(f"\n### {variant}\n")
        sides = [s for s in results if variant in results[s]]
        head = " | ".join(f"{s} TTFT | {s} cached" for s in sides)
        print(f"| turn | prompt tokens | {head} |")
        print("| --- | --- |" + " --- | --- |" * len(sides))
        first = results[sides[0]][variant]["turns"]
        for k in range(len(first)):
            cells = []
            for s in sides:
                row = results[s][variant]["turns"][k]
                cached = row.get("cached_tokens", row.get("reused_tokens"))
                cells += [f"{row['ttft_s']:.3f} s", "-" if cached is None else str(cached)]
            prompt = next((results[s][variant]["turns"][k].get("prompt_tokens") for s in sides
                           if results[s][variant]["turns"][k].get("prompt_tokens")), "-")  # fmt: skip
            print(f"| {k} | {prompt} | " + " | ".join(cells) + " |")
        totals = " | ".join(f"{s}: {results[s][variant]['session_s']:.1f} s" for s in sides)
        print(f"\nwhole session: {totals}")
        servers = [s for s in sides if s != "direct"]  # direct times prefills only
        if servers:
            print("whole turns (end of stream), output tokens, answer as the first side's:")
        for k in range(len(first) if servers else 0):
            rows = [results[s][variant]["turns"][k] for s in servers]
            print(f"  turn {k}: " + ", ".join(
                f"{s} {r['e2e_s']:.1f} s {r.get('completion_tokens') or '-'} tok"
                f"{'' if r.get('text') == rows[0].get('text') else ' (differs)'}"
                for s, r in zip(servers, rows, strict=True)))  # fmt: skip
        later = {s: statistics.median(r["ttft_s"] for r in results[s][variant]["turns"][1:])
                 for s in sides}  # fmt: skip
        print("median TTFT of turns 1..: " + ", ".join(f"{s} {v:.3f} s" for s, v in later.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="a checkpoint directory [--arch/--size]")
    parser.add_argument("--arch", default="qwen3")
    parser.add_argument("--size", default="20m-64k")
    parser.add_argument("--prompt-tokens", type=int, default=25000)
    parser.add_argument("--tools", type=int, default=24)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--sides", default="ours,mlx_lm.server,direct")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--vllm-mlx", default="/tmp/vllm-mlx-venv/bin/vllm-mlx")
    parser.add_argument("--blas", default="openblas", choices=["openblas", "bundled"])
    parser.add_argument("--openblas-threads", type=int, default=None)
    parser.add_argument("--results", default="prose", choices=["prose", "code"])
    parser.add_argument("--tool-choice", default=None, choices=["none", "auto"],
                        help="sent as the requests' tool_choice (default: not sent)")  # fmt: skip
    parser.add_argument("--omit-tools", action="store_true",
                        help="send no tool definitions (the history keeps its calls)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    path = args.model or str(ensure_checkpoint(args.arch, args.size))
    session = Session(args.seed, prompt_words(path, args), args.tools, args.turns,
                      code=args.results == "code")  # fmt: skip
    if args.omit_tools:
        session.tools = []
    variants = args.variants.split(",")
    env = side_env(args.blas, args.openblas_threads)
    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.sides.split(","):
            side = start_side(name, args, path, env, Path(tmp))
            try:
                if name == "direct":
                    results[name] = run_direct(side, session, variants, args.max_tokens)
                else:
                    results[name] = run_server(
                        side, session, variants, args.max_tokens, args.tool_choice
                    )
            finally:
                side.stop()
            print(f"{name}: done", flush=True)
            if args.json:  # kept side by side as they finish (a run cut short keeps its sides)
                Path(args.json).write_text(json.dumps(results, indent=1))
    print(f"\n{Path(path).name}, {args.tools} tools, {args.turns} turns, "
          f"max_tokens {args.max_tokens}, BLAS {args.blas}")  # fmt: skip
    report(results, variants)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

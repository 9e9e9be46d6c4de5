"""Speculative decoding measured side by side: our server without speculation, with prompt
lookup (`--speculative ngram`), and mlx_lm.server, on one real checkpoint, in one run.

    python -m scripts.bench_speculation CHECKPOINT --streams 1,8 --max-tokens 600 \\
        --sides none,ngram,mlx_lm.server --json /tmp/spec.json

Two tasks, each sent as `--streams` concurrent greedy chat requests (temperature 0):

- edit: rename a function in a 40-line Python file and output the whole file (the instruction
  comes after the code: Qwen2.5-Coder-0.5B only renames when it does). Most of the answer is
  text of the prompt, which prompt lookup proposes.
- story: free-form text, where proposals rarely hold: what speculation must not slow down.

Reported per side, task and stream count: completion tokens, wall seconds, aggregate output
tok/s, and whether each answer equals the first side's (greedy decoding with and without
speculation must give the same text). Ratios are taken within the run against the `none`
side and against mlx_lm.server. Every side runs the same prompts in the same order; sides run
one at a time (a fresh server each), so nothing else competes for the CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import tempfile
import time
from pathlib import Path

import httpx

from scripts.bench_sides import ServerSide, free_port, mlx_lm_server, ours, side_env

FUNCTIONS = [
    ("parse_header", "line", "return line.split(':', 1)[0].strip().lower()"),
    ("parse_value", "line", "return line.split(':', 1)[1].strip()"),
    ("is_comment", "line", "return line.lstrip().startswith('#')"),
    ("is_blank", "line", "return not line.strip()"),
    ("count_words", "text", "return len(text.split())"),
    ("first_word", "text", "return text.split()[0] if text.split() else ''"),
    ("last_word", "text", "return text.split()[-1] if text.split() else ''"),
    ("shout", "text", "return text.upper() + '!'"),
]


def source_file(functions: list[tuple[str, str, str]] = FUNCTIONS) -> str:
    """A 40-line module: 8 small functions and a main that calls parse_header."""
    lines = ['"""Small text helpers."""', ""]
    for name, arg, body in functions:
        lines += ["", f"def {name}({arg}):", f'    """{name.replace("_", " ")}."""', f"    {body}"]
    lines += ["", "", "def main(lines):", "    for line in lines:",
              "        if not is_comment(line) and not is_blank(line):",
              "            print(parse_header(line), parse_value(line))"]  # fmt: skip
    return "\n".join(lines) + "\n"


def edit_prompt(i: int) -> list[dict]:
    code = source_file()
    new = ["read_header", "header_of", "get_header", "header_name"][i % 4] + f"_{i}"
    ask = (
        f"```python\n{code}```\n\nRename the function `parse_header` to `{new}` everywhere in "
        "the file above. Output the whole file, and nothing else."
    )
    return [{"role": "user", "content": ask}]


def story_prompt(i: int) -> list[dict]:
    subjects = ["a lighthouse keeper", "a lost robot", "a baker on Mars", "two rival chess clubs"]
    ask = f"Write a short story about {subjects[i % 4]} (story {i})."
    return [{"role": "user", "content": ask}]


TASKS = {"edit": edit_prompt, "story": story_prompt}


async def one(client: httpx.AsyncClient, url: str, model: str, messages, max_tokens: int):
    body = {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": 0}
    response = await client.post(f"{url}/v1/chat/completions", json=body, timeout=3600)
    response.raise_for_status()
    reply = response.json()
    return reply["choices"][0]["message"]["content"], reply["usage"]["completion_tokens"]


async def run_task(side: ServerSide, task: str, streams: int, max_tokens: int) -> dict:
    prompts = [TASKS[task](i) for i in range(streams)]
    async with httpx.AsyncClient() as client:
        started = time.perf_counter()
        results = await asyncio.gather(
            *(one(client, side.url, side.model, p, max_tokens) for p in prompts)
        )
        wall = time.perf_counter() - started
    tokens = sum(n for _, n in results)
    return {
        "texts": [text for text, _ in results],
        "completion_tokens": tokens,
        "wall_s": round(wall, 2),
        "tok_s": round(tokens / wall, 2),
    }


def make_side(
    name: str,
    checkpoint: str,
    port: int,
    log_dir: Path,
    streams: int,
    draft_tokens: int | None,
    ours_args: str = "",
) -> ServerSide:
    if name == "mlx_lm.server":
        return mlx_lm_server(checkpoint, port, log_dir)
    side = ours(checkpoint, port, "openblas", log_dir, max(8, streams))
    side.command += ["--speculative", name]
    if draft_tokens is not None and name != "none":
        side.command += ["--num-draft-tokens", str(draft_tokens)]
    side.command += shlex.split(ours_args)
    side.name = f"ours --speculative {name}"
    side.log_path = log_dir / f"ours-{name}.log"
    return side


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--sides", default="none,ngram,mlx_lm.server")
    parser.add_argument("--tasks", default="edit,story")
    parser.add_argument("--streams", default="1,8", help="comma-separated stream counts")
    parser.add_argument("--max-tokens", type=int, default=600)
    parser.add_argument("--num-draft-tokens", type=int, help="ours: proposals per step")
    parser.add_argument("--ours-args", default="", help="more `serve` flags for our sides")
    parser.add_argument("--json", help="write the results here")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    sides = args.sides.split(",")
    stream_counts = [int(n) for n in args.streams.split(",")]
    tasks = args.tasks.split(",")
    log_dir = Path(tempfile.mkdtemp(prefix="bench-spec-"))
    results: dict[str, dict] = {}
    for name in sides:
        port = free_port()
        side = make_side(
            name,
            args.checkpoint,
            port,
            log_dir,
            max(stream_counts),
            args.num_draft_tokens,
            args.ours_args,
        )
        side.start(side_env("openblas"), port)
        try:
            side.wait_ready(600)
            if side.model == "auto":  # ours: the id it serves the checkpoint as
                side.model = httpx.get(f"{side.url}/v1/models").json()["data"][0]["id"]
            asyncio.run(run_task(side, "story", 1, 8))  # warm-up: load, first compile
            for task in tasks:
                for streams in stream_counts:
                    key = f"{task} x{streams}"
                    result = asyncio.run(run_task(side, task, streams, args.max_tokens))
                    results.setdefault(key, {})[name] = result
                    print(f"{name:>14} {key:>9}: {result['completion_tokens']:5d} tokens "
                          f"in {result['wall_s']:7.1f} s = {result['tok_s']:6.2f} tok/s",
                          flush=True)  # fmt: skip
        finally:
            side.stop()
    summary = summarize(results, sides)
    for line in summary["lines"]:
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, **summary}, indent=1))


def summarize(results: dict[str, dict], sides: list[str]) -> dict:
    lines, ratios = [], {}
    for key, by_side in results.items():
        first = sides[0]
        for name, result in by_side.items():
            same = result["texts"] == by_side[first]["texts"]
            row = f"{key:>9} {name:>14}: {result['tok_s']:6.2f} tok/s"
            for base in ("none", "mlx_lm.server"):
                if base in by_side and base != name:
                    ratio = result["tok_s"] / by_side[base]["tok_s"]
                    ratios[f"{key} {name} / {base}"] = round(ratio, 3)
                    row += f"  {ratio:5.2f}x {base}"
            row += "  same text as " + first if same else "  TEXT DIFFERS from " + first
            lines.append(row)
    return {"lines": lines, "ratios": ratios}


if __name__ == "__main__":
    main()

"""Direct mlx-lm, no server: the reference side of `scripts/bench_compare.py`.

Runs as a child process (so it gets the same LD_PRELOAD / BLAS as the servers it is compared
with), loads the checkpoint once, then answers JSON-line commands on stdin with JSON lines on
stdout. Each command is timed the way `vllm-omni-mlx bench` times a request, with
`time.perf_counter()`; the prompt is templated and tokenized inside the timed region, as a
server has to.

- `{"op": "single", "messages": [...], "max_tokens": N}`: one `stream_generate`.
- `{"op": "batch", "conversations": [[...], ...], "max_tokens": N}`: one `BatchGenerator` with
  a batch as large as the list (prefill and completion), until every sequence is done.
- `{"op": "turns", "messages": [...], "follow_up": "...", "max_tokens": N}`: a cold turn, then a
  second turn reusing the first turn's KV cache (trimmed to the common prefix): the ideal a
  prefix cache can reach.
- `{"op": "session", "turns": [[...], ...], "tools": [...], "max_tokens": N}`: an agent
  session (scripts/bench_agent_session.py), one KV cache carried from turn to turn, trimmed
  to each turn's common prefix with what it holds: each turn prefills only what changed.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from mlx_lm import load, stream_generate
from mlx_lm.generate import BatchGenerator
from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache
from mlx_lm.sample_utils import make_sampler


class Direct:
    def __init__(self, path: str) -> None:
        self.model, self.tokenizer = load(path)
        self.sampler = make_sampler(0.0)

    def tokens(self, messages: list[dict[str, str]], tools: list | None = None) -> list[int]:
        ids = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, **({"tools": tools} if tools else {})
        )
        return list(ids["input_ids"] if isinstance(ids, dict) else ids)

    def _stream(self, prompt: list[int], max_tokens: int, cache: Any, start: float) -> dict:
        times, tokens, text = [], [], ""
        for response in stream_generate(
            self.model,
            self.tokenizer,
            prompt,
            max_tokens=max_tokens,
            sampler=self.sampler,
            prompt_cache=cache,
        ):
            times.append(time.perf_counter() - start)
            tokens.append(response.token)
            text += response.text
        span = times[-1] - times[0]
        return {
            "ttft_s": times[0],
            "e2e_s": times[-1],
            "decode_tok_s": (len(tokens) - 1) / span if span > 0 else None,
            "completion_tokens": len(tokens),
            "tokens": tokens,
            "text": text,
        }

    def single(self, messages: list[dict[str, str]], max_tokens: int) -> dict:
        start = time.perf_counter()
        prompt = self.tokens(messages)
        result = self._stream(prompt, max_tokens, None, start)
        return {**result, "prompt_tokens": len(prompt), "tokens": None, "text": None}

    def batch(self, conversations: list[list[dict[str, str]]], max_tokens: int) -> dict:
        n = len(conversations)
        eos = [[t] for t in sorted(self.tokenizer.eos_token_ids)]
        start = time.perf_counter()
        generator = BatchGenerator(
            self.model,
            stop_tokens=eos,
            sampler=self.sampler,
            completion_batch_size=n,
            prefill_batch_size=n,
        )
        prompts = [self.tokens(messages) for messages in conversations]
        uids = generator.insert(prompts, [max_tokens] * n)
        first: dict[int, float] = {}
        counts = dict.fromkeys(uids, 0)
        left = set(uids)
        while left:
            for response in generator.next_generated():
                counts[response.uid] += 1
                first.setdefault(response.uid, time.perf_counter() - start)
                if response.finish_reason is not None:
                    left.discard(response.uid)
        duration = time.perf_counter() - start
        generator.close()
        output = sum(counts.values())
        return {
            "duration_s": duration,
            "output_tokens": output,
            "aggregate_tok_s": output / duration,
            "ttft_s": sorted(first.values()),
            "prompt_tokens": [len(p) for p in prompts],
        }

    def turns(self, messages: list[dict[str, str]], follow_up: str, max_tokens: int) -> dict:
        cache = make_prompt_cache(self.model)
        start = time.perf_counter()
        prompt = self.tokens(messages)
        cold = self._stream(prompt, max_tokens, cache, start)
        # The cache now holds the prompt and all generated tokens but the last.
        cached = prompt + cold["tokens"][:-1]
        history = [*messages, {"role": "assistant", "content": cold["text"]}]
        start = time.perf_counter()
        second = self.tokens([*history, {"role": "user", "content": follow_up}])
        common = 0
        for a, b in zip(cached, second, strict=False):
            if a != b:
                break
            common += 1
        common = min(common, len(second) - 1)  # at least one token must be prefilled
        trim_prompt_cache(cache, len(cached) - common)
        warm = self._stream(second[common:], max_tokens, cache, start)
        return {
            "cold_ttft_s": cold["ttft_s"],
            "warm_ttft_s": warm["ttft_s"],
            "prompt_tokens": [len(prompt), len(second)],
            "reused_tokens": common,
        }

    def session(self, turns: list[list[dict]], tools: list, max_tokens: int) -> dict:
        cache = make_prompt_cache(self.model)
        held: list[int] = []  # what the cache holds
        rows = []
        for messages in turns:
            start = time.perf_counter()
            prompt = self.tokens(messages, tools)
            common = 0
            for a, b in zip(held, prompt, strict=False):
                if a != b:
                    break
                common += 1
            common = min(common, len(prompt) - 1)
            trim_prompt_cache(cache, len(held) - common)
            result = self._stream(prompt[common:], max_tokens, cache, start)
            held = prompt + result["tokens"][:-1]
            rows.append({"ttft_s": result["ttft_s"], "prompt_tokens": len(prompt),
                         "reused_tokens": common})  # fmt: skip
        return {"turns": rows}


def main() -> None:
    direct = Direct(sys.argv[1])
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        op = command.pop("op")
        if op == "quit":
            break
        print(json.dumps(getattr(direct, op)(**command)), flush=True)


if __name__ == "__main__":
    main()

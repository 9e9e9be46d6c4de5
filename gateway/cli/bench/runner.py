"""Runs a benchmark: calibrate prompts, warm up, then each concurrency level in turn.

A level runs `requests` conversations with at most `concurrency` in flight (a closed loop: a
finished conversation makes room for the next). A conversation is `turns` requests in a row,
each carrying the history so far, so later turns measure what a prefix cache saves.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from gateway.cli.bench.client import RequestResult, first_model_id, request_body, stream_request
from gateway.cli.bench.prompts import Calibration, ConversationPlan, PromptFactory

# Used when the server reports no usage.prompt_tokens (measured for this word list on a
# byte-level BPE tokenizer; only the prompt length is then approximate).
FALLBACK_CALIBRATION = Calibration(overhead=0.0, tokens_per_word=1.5)
CALIBRATION_WORDS = (16, 512)


@dataclass(frozen=True)
class BenchConfig:
    url: str = "http://127.0.0.1:8000"
    api_key: str | None = None
    model: str = "auto"
    endpoint: str = "chat"  # or "completions"
    prompt_tokens: int = 512  # turn 1's whole prompt, or each later turn's new message
    max_tokens: int = 128
    concurrency: tuple[int, ...] = (1,)
    requests: int | None = None  # conversations per level; None: 2 x concurrency
    turns: int = 1
    history_tokens: int | None = None  # turn 1's prompt when turns > 1 (default prompt_tokens)
    warmup: int = 1
    seed: int | None = None  # None: a fresh one, recorded in the report
    timeout: float = 600.0

    def requests_at(self, concurrency: int) -> int:
        return self.requests if self.requests is not None else 2 * concurrency


@dataclass
class RequestRecord:
    concurrency: int
    conversation: int
    turn: int
    result: RequestResult


@dataclass
class LevelRun:
    concurrency: int
    duration: float  # from the level's first request sent to its last stream closed
    records: list[RequestRecord]


@dataclass
class BenchReport:
    config: BenchConfig
    model: str
    seed: int
    calibration: Calibration
    levels: list[LevelRun] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def open_client(
    url: str, api_key: str | None, timeout: float, connections: int
) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.AsyncClient(
        base_url=url.rstrip("/"),
        headers=headers,
        timeout=httpx.Timeout(timeout, connect=10.0),
        limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
    )


class BenchSession:
    """One server: its model id, the prompt calibration and the conversations sent to it."""

    def __init__(self, client: httpx.AsyncClient, config: BenchConfig, seed: int) -> None:
        self.client = client
        self.config = config
        self.factory = PromptFactory(seed)
        self.model = config.model
        self.calibration = FALLBACK_CALIBRATION
        self.warnings: list[str] = []

    @property
    def plan(self) -> ConversationPlan:
        first = self.config.history_tokens if self.config.turns > 1 else None
        return ConversationPlan(
            self.factory,
            self.calibration,
            first_tokens=first or self.config.prompt_tokens,
            follow_up_tokens=self.config.prompt_tokens,
        )

    async def prepare(self) -> None:
        """Resolve `--model auto` and fit the prompt calibration (requests of one token)."""
        if self.model == "auto":
            self.model = await first_model_id(self.client)
        measured = []
        for words in CALIBRATION_WORDS:
            prompt = self.opening(self.factory.text(words, f"calibrate/{words}"))
            result = await self.send(prompt, max_tokens=1)
            if not result.ok:
                raise RuntimeError(f"calibration request failed: {result.error}")
            measured.append(result.prompt_tokens)
        if None in measured:
            self.warnings.append(
                "the server reports no usage.prompt_tokens: prompt sizes are approximate"
            )
        else:
            self.calibration = Calibration.fit(CALIBRATION_WORDS, tuple(measured))

    def opening(self, text: str) -> str | list[dict[str, str]]:
        """The first prompt of a conversation whose user says `text`."""
        return [{"role": "user", "content": text}] if self.config.endpoint == "chat" else text

    def extend(
        self, prompt: str | list[dict[str, str]], reply: str, text: str
    ) -> str | list[dict[str, str]]:
        """`prompt` followed by the server's `reply` and a new user message `text`."""
        if isinstance(prompt, list):
            return [
                *prompt,
                {"role": "assistant", "content": reply},
                {"role": "user", "content": text},
            ]
        return f"{prompt}{reply}\n{text}"

    async def send(self, prompt: str | list[dict[str, str]], max_tokens: int) -> RequestResult:
        body = request_body(self.config.endpoint, self.model, prompt, max_tokens)
        return await stream_request(self.client, self.config.endpoint, body)

    async def conversation(
        self, key: str, on_request: Callable[[int, RequestResult], None]
    ) -> None:
        """Send the turns of conversation `key`; stops at the first failed turn."""
        plan = self.plan
        prompt = self.opening(plan.user_text(key, 1))
        for turn in range(1, self.config.turns + 1):
            result = await self.send(prompt, self.config.max_tokens)
            on_request(turn, result)
            if not result.ok:
                return
            if turn < self.config.turns:
                prompt = self.extend(prompt, result.text, plan.user_text(key, turn + 1))

    async def level(
        self, concurrency: int, conversations: int, label: str, on_done: Callable[[], None]
    ) -> LevelRun:
        """`conversations` conversations, at most `concurrency` at a time."""
        records: list[RequestRecord] = []
        pending = iter(range(conversations))

        async def lane() -> None:
            for index in pending:

                def record(turn: int, result: RequestResult, index: int = index) -> None:
                    records.append(RequestRecord(concurrency, index, turn, result))
                    on_done()

                await self.conversation(f"{label}/{index}", record)

        start = time.perf_counter()
        await asyncio.gather(*(lane() for _ in range(min(concurrency, conversations))))
        return LevelRun(concurrency, time.perf_counter() - start, records)

    async def warm_up(self, requests: int) -> None:
        """Requests whose results are dropped: first-call costs stay out of the numbers."""
        for i in range(requests):
            await self.send(
                self.opening(self.plan.user_text(f"warmup/{i}", 1)), self.config.max_tokens
            )


async def run_bench(
    config: BenchConfig, progress: Callable[[int], Callable[[], None]] | None = None
) -> BenchReport:
    """Run every level of `config`; `progress(total)` returns the per-request tick."""
    seed = config.seed if config.seed is not None else random.SystemRandom().randrange(2**31)
    connections = max(config.concurrency) + 1
    async with open_client(config.url, config.api_key, config.timeout, connections) as client:
        session = BenchSession(client, config, seed)
        await session.prepare()
        await session.warm_up(config.warmup)
        report = BenchReport(
            config, session.model, seed, session.calibration, warnings=session.warnings
        )
        total = sum(config.requests_at(c) for c in config.concurrency) * config.turns
        tick = progress(total) if progress else (lambda: None)
        for concurrency in config.concurrency:
            conversations = config.requests_at(concurrency)
            report.levels.append(
                await session.level(concurrency, conversations, f"c{concurrency}", tick)
            )
    return report

"""A scripted in-process `EngineClient` (gateway/workers/protocol.py), for the gateway HTTP tests.

Each request replays `engine.script`: a list of batches (lists of Delta), where `HANG` waits
forever (until the request is cancelled), a `Sleep` waits that long and an exception instance
is raised. The fake records
every request it was given and whether it was left before its terminal delta (= aborted).
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from gateway.config import ServerConfig
from gateway.workers.errors import EngineUnavailable, WorkerRejected
from gateway.workers.request_stream import RequestStream
from protocol.inputs import ChatInputs, Inputs
from protocol.messages import PROTOCOL_VERSION, Delta, ErrorInfo, Ready, TokenizeArgs, Usage
from protocol.ready import (
    Capability,
    EmbeddingInfo,
    ImageInfo,
    ScoreInfo,
    SpeechInfo,
    TextInfo,
    TranscriptionInfo,
    VideoInfo,
)

HANG = object()


class Sleep:
    """A script element: the worker is silent this long (a queue wait, a long prefill)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


def accepted() -> list[Delta]:
    return [Delta("r")]


def text(*parts: str) -> list[Delta]:
    return [Delta("r", text=p, token_ids=[1]) for p in parts]


def finish(reason: str = "stop", prompt: int = 5, completion: int = 2) -> list[Delta]:
    return [Delta("r", finish_reason=reason, usage=Usage(prompt, completion))]


def failure(code: str = "internal", message: str = "boom") -> list[Delta]:
    return [Delta("r", finish_reason="error", usage=Usage(5, 0), error=ErrorInfo(code, message))]


CHAT_MODEL = TextInfo(4096, "continuous")


def ready(
    *capabilities: Capability,
    model: str = "/models/tiny",
    text: TextInfo | None = CHAT_MODEL,
    speech: SpeechInfo | None = None,
    transcription: TranscriptionInfo | None = None,
    embedding: EmbeddingInfo | None = None,
    score: ScoreInfo | None = None,
    image: ImageInfo | None = None,
    video: VideoInfo | None = None,
) -> Ready:
    """The Ready of a worker with these capabilities (and sections)."""
    caps = list(capabilities)
    return Ready(
        PROTOCOL_VERSION,
        7,
        model,
        caps,
        8,
        text,
        speech,
        transcription,
        embedding,
        score,
        image,
        video,
    )


def config(**overrides: Any) -> ServerConfig:
    """A ServerConfig for tests; `api_key="k"` stands for `api_keys=("k",)`."""
    if "api_key" in overrides:
        key = overrides.pop("api_key")
        overrides["api_keys"] = (key,) if key else ()
    return ServerConfig(model="/models/tiny", served_model_name="tiny", **overrides)


class FakeRequest:
    def __init__(self, engine: FakeEngine, inputs: Inputs, stream: bool) -> None:
        self.engine = engine
        self.op = inputs.op
        self.inputs = inputs
        self.sampling = getattr(inputs, "sampling", None)  # chat and complete only
        self.stream = stream
        self.finished = False
        self.exited = asyncio.Event()
        self.aborted = False
        self.served = asyncio.Event()  # set once the last scripted batch was handed out

    async def __aenter__(self) -> Any:
        self.engine.requests.append(self)
        if self.engine.admission_error is not None:
            raise self.engine.admission_error
        return self._batches()

    async def __aexit__(self, *exc_info: object) -> None:
        self.aborted = not self.finished
        self.exited.set()

    async def _batches(self) -> Any:
        for batch in self.engine.script:
            if batch is HANG:
                self.served.set()
                await asyncio.Event().wait()
            if isinstance(batch, Sleep):
                await asyncio.sleep(batch.seconds)
                continue
            if isinstance(batch, BaseException):
                raise batch
            if any(d.finish_reason for d in batch):
                self.finished = True
            yield _as_the_engine_batches(batch)
        self.served.set()


def _as_the_engine_batches(batch: list[Delta]) -> list[Delta]:
    """A scripted batch as the real engine hands it out: through a RequestStream, which merges
    what can be merged (copies, since scripts are shared between requests)."""
    stream = RequestStream("r")
    for delta in batch:
        stream.push(copy.deepcopy(delta))
    return stream.take()


class FakeEngine:
    def __init__(self, script: list[Any] | None = None) -> None:
        self.script = script if script is not None else [accepted(), text("Hel", "lo"), finish()]
        self.requests: list[FakeRequest] = []
        self.admission_error: EngineUnavailable | None = None
        self.state = "ready"
        self.reason: str | None = None
        self.model_name = "tiny"
        self.model_path = "/models/tiny"
        self.ready_info: Ready | None = ready(Capability.CHAT)
        self.started = False
        self.stopped = False
        self.swaps: list[tuple[str, str | None]] = []
        self.swap_error: Exception | None = None
        self.input_tokens = 42  # what count_tokens answers (or it raises count_error)
        self.count_error: Exception | None = None
        self.counted: list[dict] = []
        # tokenize answers `tokens` (and a string per token when asked), detokenize `text`;
        # each records its arguments, or raises `tokenize_error`.
        self.tokens = [5, 6, 7]
        self.text = "decoded"
        self.tokenize_error: Exception | None = None
        self.tokenized: list[Any] = []

    async def start(self) -> None:
        self.started = True

    async def stop(self) -> None:
        self.stopped = True

    def request(self, inputs: Inputs, stream: bool) -> FakeRequest:
        return FakeRequest(self, inputs, stream)

    async def swap(self, model_path: str, served_model_name: str | None = None) -> dict:
        self.swaps.append((model_path, served_model_name))
        if self.swap_error is not None:
            raise self.swap_error
        self.model_path = model_path
        self.model_name = served_model_name or model_path
        return {"loaded": model_path}

    async def count_tokens(self, inputs: ChatInputs) -> int:
        self.counted.append(inputs)
        if self.count_error is not None:
            raise self.count_error
        return self.input_tokens

    async def tokenize(self, args: TokenizeArgs) -> tuple[list[int], list[str] | None]:
        self.tokenized.append(args)
        if self.tokenize_error is not None:
            raise self.tokenize_error
        strings = [f"t{t}" for t in self.tokens] if args.return_token_strs else None
        return list(self.tokens), strings

    async def detokenize(self, tokens: list[int]) -> str:
        self.tokenized.append(tokens)
        if self.tokenize_error is not None:
            raise self.tokenize_error
        return self.text

    async def worker_stats(self) -> dict:
        return {"active": 0, "waiting": 0}

    async def change_adapter(self, name: str, path: str | None, replace: bool = False) -> None:
        raise WorkerRejected("the fake engine serves no LoRA adapters")

    def health(self) -> tuple[int, dict]:
        if self.state == "ready":
            return 200, {"status": "ok", "model": self.model_name}
        return 503, {"status": self.state, "reason": self.reason}

    @property
    def last(self) -> FakeRequest:
        return self.requests[-1]


def make_client(engine: FakeEngine | None = None, **overrides: Any) -> Any:
    """A TestClient over the real app with `engine` (use it as a context manager)."""
    from starlette.testclient import TestClient

    from gateway.app import create_app

    app = create_app(config(**overrides), engine or FakeEngine())
    return TestClient(app, raise_server_exceptions=False)


def fake_checkpoint(directory: Any) -> Any:
    """Make `directory` look like a checkpoint to the gateway's checks (a config.json and a
    weights file); nothing loads it (the fake engine swaps to it by name)."""
    from pathlib import Path

    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text("{}")
    (path / "model.safetensors").write_bytes(b"")
    return path

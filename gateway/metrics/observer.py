"""The gateway's request metrics: an `EngineObserver` that counts what every request's deltas say.

Every admitted request is seen three ways (gateway/workers/observer.py): admitted (with the time
it arrived, i.e. asked for admission), each non-terminal worker delta as it arrives, and its end
(exactly once: its terminal delta, or its reader leaving first). From these:

- queue time: arrival -> the request's first worker delta (the worker's "accepted" delta, sent
  once it took the request off its queue and built the prompt, before the prefill), so the
  gateway's admission queue, the hand-over and the worker's own wait;
- TTFT: arrival -> the first delta carrying generated tokens (chat and completions);
- ITL: one observation per later token-bearing delta, the time since the previous one, as vLLM
  observes one per engine step (the worker sends one delta per request per step);
- e2e: arrival -> the end;
- prompt tokens (the whole prompt, cached tokens included) when the worker's accepted delta
  reports them, else from the terminal usage; generated tokens as their deltas arrive, topped up
  to the terminal usage's `completion_tokens` if the worker counted more than it sent;
- request_success{finished_reason}: the terminal's reason; "abort" when the reader left first.

Times are the gateway's `time.monotonic()` when the worker's Step arrived. Labels: `model_name`
(gateway/metrics/names.py) and, for the server's own `vomlx:requests_total`, the operation.
The calls per delta are a dict lookup and a counter or histogram update.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from gateway.metrics.names import ModelNames
from gateway.workers.observer import EngineObserver
from protocol.messages import Delta

GENERATING_OPS = frozenset({"chat", "complete"})  # their tokens are "generation tokens"
PROMPT_TOKEN_OPS = GENERATING_OPS | {"embed", "score"}  # usage.prompt_tokens are tokens
FINISH_REASONS = ("stop", "length", "tool_calls", "abort", "error")
ABORT = "abort"

# vLLM's boundaries (vllm/v1/metrics/loggers.py), so that its dashboards' quantiles line up.
TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
    10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
ITL_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0,
)  # fmt: skip
REQUEST_LATENCY_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
    240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip

MODEL = ["model_name"]


class _Series:
    """One model's children of the per-delta metrics (`labels()` takes a lock: once only)."""

    __slots__ = ("prompt_tokens", "generation_tokens", "ttft", "itl", "queue_time")

    def __init__(self, observer: MetricsObserver, model: str) -> None:
        self.prompt_tokens = observer.prompt_tokens.labels(model)
        self.generation_tokens = observer.generation_tokens.labels(model)
        self.ttft = observer.ttft.labels(model)
        self.itl = observer.itl.labels(model)
        self.queue_time = observer.queue_time.labels(model)


class _Open:
    """One admitted request's progress."""

    __slots__ = (
        "model", "series", "op", "arrived", "started", "prompt_counted", "generated",
        "last_token",
    )  # fmt: skip

    def __init__(self, model: str, series: _Series, op: str, arrived: float) -> None:
        self.model = model
        self.series = series
        self.op = op
        self.arrived = arrived
        self.started = False  # its first worker delta arrived (queue time observed)
        self.prompt_counted = op not in PROMPT_TOKEN_OPS
        self.generated = 0  # generation tokens counted so far
        self.last_token: float | None = None  # when its last token-bearing delta arrived


class MetricsObserver(EngineObserver):
    def __init__(self, registry: CollectorRegistry, names: ModelNames) -> None:
        self._names = names
        self._open: dict[str, _Open] = {}
        self._series: dict[str, _Series] = {}

        def counter(name: str, doc: str, labels: list[str] = MODEL) -> Counter:
            return Counter(name, doc, labels, registry=registry)

        def histogram(name: str, doc: str, buckets: tuple, labels: list[str] = MODEL) -> Histogram:
            return Histogram(name, doc, labels, buckets=buckets, registry=registry)

        self.prompt_tokens = counter(
            "vllm:prompt_tokens",
            "Prompt tokens of chat, completion, embedding and rerank/score requests (whole "
            "prompts, prefix-cached tokens included), counted when the worker accepts the "
            "request (else at its end).",
        )
        self.generation_tokens = counter(
            "vllm:generation_tokens",
            "Tokens generated for chat and completion requests, counted as they arrive from "
            "the worker.",
        )
        self.request_success = counter(
            "vllm:request_success",
            "Requests ended, by finished_reason: stop, length, tool_calls, error, or abort "
            "(the client left, or the server aborted it).",
            MODEL + ["finished_reason"],
        )
        self.requests = counter(
            "vomlx:requests",
            "Requests ended, by operation (chat, complete, speech, transcribe, embed, score) "
            "and finished_reason.",
            MODEL + ["operation", "finished_reason"],
        )
        self.ttft = histogram(
            "vllm:time_to_first_token_seconds",
            "Seconds from a chat or completion request's arrival at the gateway's admission "
            "(before any queueing) to the arrival of its first generated token from the worker.",
            TTFT_BUCKETS,
        )
        self.itl = histogram(
            "vllm:inter_token_latency_seconds",
            "Seconds between consecutive worker deltas carrying generated tokens of one chat "
            "or completion request (one observation per worker step, as vLLM's).",
            ITL_BUCKETS,
        )
        self.e2e = histogram(
            "vllm:e2e_request_latency_seconds",
            "Seconds from a request's arrival at the gateway's admission to its end (its "
            "terminal delta, or its client leaving).",
            REQUEST_LATENCY_BUCKETS,
        )
        self.queue_time = histogram(
            "vllm:request_queue_time_seconds",
            "Seconds from a request's arrival at the gateway's admission to the worker "
            "accepting it (its first delta, before the prefill): the gateway's admission "
            "queue plus the worker's own wait.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.embedding_inputs = counter(
            "vomlx:embedding_inputs",
            "Inputs embedded (one vector each) by /v1/embeddings requests that succeeded.",
        )
        self.rejections = counter(
            "vomlx:request_rejections",
            "Requests refused admission (HTTP 503), by reason: queue_full (the admission "
            "queue held --max-queue requests) or unavailable (the engine had failed or was "
            "stopping, or no worker became ready within the queue timeout).",
            MODEL + ["reason"],
        )
        self.restarts = counter(
            "vomlx:worker_restarts",
            "Worker crashes (an exit, a fatal error, or silence past the heartbeat timeout), "
            "each followed by a restart unless --max-restarts gave up.",
        )
        self.load_seconds = histogram(
            "vomlx:model_load_seconds",
            "Seconds from spawning a worker to its READY, for every successful load (start, "
            "restart, swap).",
            REQUEST_LATENCY_BUCKETS,
        )
        self.swap_seconds = histogram(
            "vomlx:model_swap_seconds",
            "Seconds a model swap took (drain, old worker out, new one ready), by result: ok, "
            "or failed (the previous model may have been restored).",
            REQUEST_LATENCY_BUCKETS,
            MODEL + ["result"],
        )

    def touch(self, model: str) -> None:
        """Create the series of `model` at zero, so rates and increases start from there."""
        for metric in (self.prompt_tokens, self.generation_tokens, self.ttft, self.itl,
                       self.e2e, self.queue_time, self.restarts):  # fmt: skip
            metric.labels(model)
        for reason in FINISH_REASONS:
            self.request_success.labels(model, reason)
        for reason in ("queue_full", "unavailable"):
            self.rejections.labels(model, reason)

    # -- EngineObserver --------------------------------------------------------------------

    def for_model(self, model: str) -> EngineObserver:
        """This observer for one model's engine of a models file: its requests labelled with
        the model's id."""
        return _OneModel(self, model)

    def admitted(self, request_id: str, op: str, arrived: float) -> None:
        self.admitted_as(self._names.for_op(op), request_id, op, arrived)

    def admitted_as(self, model: str, request_id: str, op: str, arrived: float) -> None:
        series = self._series.get(model)
        if series is None:
            series = self._series[model] = _Series(self, model)
        self._open[request_id] = _Open(model, series, op, arrived)

    def delta(self, delta: Delta, now: float) -> None:
        request = self._open.get(delta.request_id)
        if request is not None:
            self._observe(request, delta, now)

    def ended(self, request_id: str, terminal: Delta | None, now: float) -> None:
        request = self._open.pop(request_id, None)
        if request is None:
            return
        model = request.model
        reason = ABORT
        if terminal is not None:
            # Only the worker's terminal deltas carry usage: one made in the gateway (the
            # worker died, a swap, a slow reader) says nothing about the queue.
            usage = terminal.usage
            self._observe(request, terminal, now, from_worker=usage is not None)
            reason = str(terminal.finish_reason or ABORT)
            if usage is not None and request.op in GENERATING_OPS:
                missing = usage.completion_tokens - request.generated
                if missing > 0:
                    request.series.generation_tokens.inc(missing)
            if request.op == "embed" and terminal.embeddings and reason == "stop":
                self.embedding_inputs.labels(model).inc(len(terminal.embeddings))
        self.request_success.labels(model, reason).inc()
        self.requests.labels(model, request.op, reason).inc()
        self.e2e.labels(model).observe(now - request.arrived)

    def rejected(self, reason: str) -> None:
        self.rejected_as(self._names.main(), reason)

    def rejected_as(self, model: str, reason: str) -> None:
        self.rejections.labels(model, reason).inc()

    def worker_loaded(self, model_name: str, seconds: float) -> None:
        self.load_seconds.labels(model_name).observe(seconds)

    def worker_crashed(self, model_name: str) -> None:
        self.restarts.labels(model_name).inc()

    def swap_finished(self, model_name: str, seconds: float, ok: bool) -> None:
        self.swap_seconds.labels(model_name, "ok" if ok else "failed").observe(seconds)

    # -- internals -------------------------------------------------------------------------

    def _observe(self, request: _Open, delta: Delta, now: float, from_worker: bool = True) -> None:
        series = request.series
        if not request.started and from_worker:
            request.started = True
            series.queue_time.observe(now - request.arrived)
        if not request.prompt_counted and delta.usage is not None:
            request.prompt_counted = True
            series.prompt_tokens.inc(delta.usage.prompt_tokens)
        tokens = len(delta.token_ids)
        if tokens and request.op in GENERATING_OPS:
            request.generated += tokens
            series.generation_tokens.inc(tokens)
            if request.last_token is None:
                series.ttft.observe(now - request.arrived)
            else:
                series.itl.observe(now - request.last_token)
            request.last_token = now


class _OneModel(EngineObserver):
    """A MetricsObserver as one models-file model's engine reports to it."""

    def __init__(self, inner: MetricsObserver, model: str) -> None:
        self._inner = inner
        self._model = model

    def admitted(self, request_id: str, op: str, arrived: float) -> None:
        self._inner.admitted_as(self._model, request_id, op, arrived)

    def delta(self, delta: Delta, now: float) -> None:
        self._inner.delta(delta, now)

    def ended(self, request_id: str, terminal: Delta | None, now: float) -> None:
        self._inner.ended(request_id, terminal, now)

    def rejected(self, reason: str) -> None:
        self._inner.rejected_as(self._model, reason)

    def worker_loaded(self, model_name: str, seconds: float) -> None:
        self._inner.worker_loaded(model_name, seconds)

    def worker_crashed(self, model_name: str) -> None:
        self._inner.worker_crashed(model_name)

    def swap_finished(self, model_name: str, seconds: float, ok: bool) -> None:
        self._inner.swap_finished(model_name, seconds, ok)

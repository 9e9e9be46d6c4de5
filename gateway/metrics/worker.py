"""What /metrics reads at scrape time: the engine's state and queue, and the worker's counters.

The worker counts prefix-cache lookups, prompt tokens prefilled in decode steps, speech sent (and
the voice cache's lookups), audio transcribed and image denoising steps itself
(worker/runtime/stats.py) and reports totals since it started in its `stats` control reply. A restart or a swap starts a new worker from zero, so `WorkerTotals`
keeps exported counters monotonic: when a snapshot comes from another worker (another pid, or a
counter went down), the last totals seen from the previous one are carried over and added from
then on. What a worker counted after the last scrape before it died is lost (nobody can ask it
any more); a scrape rate above the crash rate keeps that small. Each counter is labelled with
the model that serves its kind when the snapshot arrives (the chat model for the prefix cache,
the TTS model for speech, ...), and left out while no served model has that kind; the models a
worker serves never change during its life.

While no worker is ready, the last totals are exported unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from gateway.metrics.names import ModelNames
from gateway.workers.served_models import CHAT, IMAGE, SPEECH, TRANSCRIPTION, VIDEO

STATES = ("starting", "ready", "restarting", "swapping", "failed", "stopped")

# (key in the worker's stats, metric, help, the kind whose model labels it)
WORKER_COUNTERS = (
    (
        "prefix_cache_queries",
        "vllm:prefix_cache_queries",
        "Prefix cache queries, in terms of number of queried tokens: the prompt tokens of "
        "every chat or completion request looked up in the worker's prefix cache.",
        CHAT,
    ),
    (
        "prefix_cache_hits",
        "vllm:prefix_cache_hits",
        "Prefix cache hits, in terms of number of cached tokens: prompt tokens reused from "
        "the prefix cache instead of prefilled.",
        CHAT,
    ),
    (
        "prefill_tokens_in_decode_steps",
        "vomlx:prefill_tokens_in_decode_steps",
        "Prompt tokens prefilled inside decoding streams' forward passes (one pass over the "
        "weights for both) rather than in a prefill pass of their own.",
        CHAT,
    ),
    (
        "spec_decode_num_drafts",
        "vllm:spec_decode_num_drafts",
        "Number of spec decoding drafts: one sequence's proposed tokens verified in one step.",
        CHAT,
    ),
    (
        "spec_decode_num_draft_tokens",
        "vllm:spec_decode_num_draft_tokens",
        "Number of draft tokens: tokens proposed (prompt lookup or the draft model).",
        CHAT,
    ),
    (
        "spec_decode_num_accepted_tokens",
        "vllm:spec_decode_num_accepted_tokens",
        "Number of accepted tokens: proposed tokens the model's own sampling agreed with.",
        CHAT,
    ),
    (
        "speech_seconds",
        "vomlx:speech_seconds",
        "Seconds of speech audio the worker sent (/v1/audio/speech).",
        SPEECH,
    ),
    (
        "voice_cache_queries",
        "vomlx:voice_cache_queries",
        "Voice cache queries, in tokens: the talker prefill of every Qwen3-TTS request, whose "
        "voice prefix (instruction, speaker, reference transcript) is looked up.",
        SPEECH,
    ),
    (
        "voice_cache_hits",
        "vomlx:voice_cache_hits",
        "Voice cache hits, in tokens: voice-prefix tokens whose KV was reused, not prefilled.",
        SPEECH,
    ),
    (
        "voice_cache_evictions",
        "vomlx:voice_cache_evictions",
        "Voice cache entries (prefix KV, x-vectors, reference clips' codes) evicted to stay "
        "within --voice-cache-bytes.",
        SPEECH,
    ),
    (
        "transcribed_seconds",
        "vomlx:transcribed_audio_seconds",
        "Seconds of audio in transcriptions and translations that completed.",
        TRANSCRIPTION,
    ),
    (
        "image_steps",
        "vomlx:image_denoising_steps",
        "Denoising steps of image generation run (/v1/images); per second: its rate.",
        IMAGE,
    ),
    (
        "image_step_seconds",
        "vomlx:image_denoising_seconds",
        "Seconds those denoising steps took (steps per second: the two rates' ratio).",
        IMAGE,
    ),
    (
        "video_steps",
        "vomlx:video_denoising_steps",
        "Denoising steps of video generation run (/v1/videos); per second: its rate.",
        VIDEO,
    ),
    (
        "video_step_seconds",
        "vomlx:video_denoising_seconds",
        "Seconds those denoising steps took (steps per second: the two rates' ratio).",
        VIDEO,
    ),
)


# The worker's list of accepted tokens by position in a draft, exported as one series per
# position (vLLM's `position` label); kept in WorkerTotals under "<key>:<position>".
PER_POSITION = "spec_decode_num_accepted_tokens_per_pos"


class WorkerTotals:
    """The worker counters summed over every worker this gateway ran (see the docstring)."""

    def __init__(self) -> None:
        self._carried: dict[tuple[str, str], float] = {}  # (stats key, model): workers gone
        self._current: dict[tuple[str, str], float] = {}  # the latest worker's totals
        self._pid: Any = None

    def update(self, stats: dict[str, Any], names: ModelNames) -> None:
        current: dict[tuple[str, str], float] = {}
        for key, _, _, kind in WORKER_COUNTERS:
            value, model = stats.get(key), names.for_kind(kind)
            if (
                model is not None
                and isinstance(value, (int, float))
                and not isinstance(value, bool)
            ):
                current[(key, model)] = float(value)
        chat_model = names.for_kind(CHAT)
        per_position = stats.get(PER_POSITION)
        if chat_model is not None and isinstance(per_position, list):
            for position, value in enumerate(per_position):
                if isinstance(value, int) and not isinstance(value, bool):
                    current[(f"{PER_POSITION}:{position}", chat_model)] = float(value)
        pid = stats.get("pid")
        went_down = any(value < self._current.get(k, 0.0) for k, value in current.items())
        if pid != self._pid or went_down:
            for k, value in self._current.items():
                self._carried[k] = self._carried.get(k, 0.0) + value
            self._pid = pid
            self._current = {}
        self._current.update(current)

    def totals(self, key: str) -> dict[str, float]:
        """model -> total of the stats counter `key`."""
        out: dict[str, float] = {}
        for source in (self._carried, self._current):
            for (k, model), value in source.items():
                if k == key:
                    out[model] = out.get(model, 0.0) + value
        return out

    def per_position(self) -> dict[tuple[str, str], float]:
        """(model, position) -> accepted tokens at that position of a draft."""
        out: dict[tuple[str, str], float] = {}
        for source in (self._carried, self._current):
            for (k, model), value in source.items():
                if k.startswith(PER_POSITION + ":"):
                    key = (model, k.rsplit(":", 1)[1])
                    out[key] = out.get(key, 0.0) + value
        return out


POOL_STATES = ("unloaded", "loading", "ready", "restarting", "failed")


@dataclass(frozen=True, slots=True)
class Source:
    """One engine as the scrape reads it: its label, state, queue and worker totals."""

    model: str
    state: str
    states: tuple[str, ...]
    queue: dict[str, int] | None
    totals: WorkerTotals


class EngineCollector:
    """A prometheus_client custom collector: reads the engines and their worker totals at
    scrape time (no background work). `sources()` names them: the one worker's engine, or
    (a models file) every model's."""

    def __init__(self, sources: Callable[[], list[Source]]) -> None:
        self._sources = sources

    def collect(self) -> Iterator[Metric]:
        sources = self._sources()
        running = GaugeMetricFamily(
            "vllm:num_requests_running",
            "Requests holding one of the --max-num-seqs slots: admitted by the gateway "
            "and not yet ended.",
            labels=["model_name"],
        )
        waiting = GaugeMetricFamily(
            "vllm:num_requests_waiting",
            "Requests waiting in the gateway's admission queue for a slot (at most --max-queue).",
            labels=["model_name"],
        )
        state = GaugeMetricFamily(
            "vomlx:worker_state",
            "1 for the engine's current state, 0 for the others: starting (loading the "
            "model), ready, restarting (after a crash), swapping (loading another model), "
            "failed, stopped; with --models FILE each model's: unloaded, loading, ready, "
            "restarting, failed.",
            labels=["model_name", "state"],
        )
        for source in sources:
            if source.queue is not None:
                running.add_metric([source.model], source.queue["in_flight"])
                waiting.add_metric([source.model], source.queue["waiting"])
            for name in source.states:
                state.add_metric([source.model, name], 1.0 if source.state == name else 0.0)
        if any(source.queue is not None for source in sources):
            yield running
            yield waiting
        yield state
        for key, metric, doc, _ in WORKER_COUNTERS:
            family = CounterMetricFamily(metric, doc, labels=["model_name"])
            totals: dict[str, float] = {}
            for source in sources:
                for served, value in source.totals.totals(key).items():
                    totals[served] = totals.get(served, 0.0) + value
            for served, value in sorted(totals.items()):
                family.add_metric([served], value)
            yield family
        per_position = CounterMetricFamily(
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            "Accepted tokens per draft position: how many drafts had their token at each "
            "position (from 0) accepted.",
            labels=["model_name", "position"],
        )
        counts: dict[tuple[str, str], float] = {}
        for source in sources:
            for pair, value in source.totals.per_position().items():
                counts[pair] = counts.get(pair, 0.0) + value
        for (served, position), value in sorted(
            counts.items(), key=lambda kv: (kv[0][0], int(kv[0][1]))
        ):
            per_position.add_metric([served, position], value)
        yield per_position

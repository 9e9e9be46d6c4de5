"""The worker's generation flags, and building the text engine they describe.

Flags (the gateway's `serve` passes the same names): --prefill-step-size, --prefill-interleave,
--draft-model, --adapter-path, --num-draft-tokens, --speculative, --prompt-lookup-min,
--prompt-lookup-max, --kv-bits, --kv-group-size, --quantized-kv-start, --max-kv-size, --dtype,
--blas, --prefix-cache-bytes, --ssd-cache-dir, --ssd-cache-max-gb, --warm-prompts; and --lora
NAME=PATH (the gateway's --lora-modules and the adapters loaded since), --max-loras.
`build_text_engine` loads the model (and draft model), opens the prefix cache and picks the
engine: continuous batching (worker/text/batch_engine.py) unless a setting mlx-lm's BatchGenerator
does not support asks for the batch-1 path (worker/text/solo_engine.py).
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass, replace
from typing import Any

from protocol.launch import blas

log = logging.getLogger(__name__)

DEFAULT_PREFIX_CACHE_BYTES = 2 << 30
KV_BITS = (2, 3, 4, 5, 6, 8)
DTYPES = ("auto", "float32", "float16", "bfloat16")


def add_generation_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--prefill-step-size", type=int, default=2048, help="prompt tokens per prefill chunk")
    add(
        "--prefill-interleave",
        type=float,
        help="beside decoding streams a prefill chunk (or a unit of an image's vision encoding) "
        "takes at most this many times their decode step (worker/text/prefill_pacing.py, "
        "worker/vision/slicing.py; default 0.7, 0: whole chunks; a distributed group: 0)",
    )
    add("--draft-model", help="checkpoint directory of a draft model (speculative decoding)")
    add("--adapter-path", help="an mlx-lm LoRA adapter directory applied to the model")
    add(
        "--lora",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="an mlx-lm LoRA adapter served beside the model as NAME, chosen per request "
        "(worker/text/adapters/); repeatable",
    )
    add("--max-loras", type=int, default=8, help="LoRA adapters loaded at once, at most")
    add(
        "--num-draft-tokens",
        type=int,
        help="proposals per sequence and step [default: prompt lookup 5, a draft model 3]",
    )
    add(
        "--speculative",
        default="auto",
        help="auto | ngram | draft | none: speculative decoding (worker/text/speculation/)",
    )
    add("--prompt-lookup-min", type=int, default=2, help="ngram: shortest n-gram matched")
    add("--prompt-lookup-max", type=int, default=8, help="ngram: longest n-gram matched")
    add("--kv-bits", type=int, choices=KV_BITS, help="quantize the KV cache to these bits")
    add("--kv-group-size", type=int, default=64, choices=(32, 64, 128))
    add("--quantized-kv-start", type=int, default=5000, help="quantize the KV cache after it")
    add("--max-kv-size", type=int, help="rotating KV cache of this many tokens")
    add("--dtype", default="auto", choices=DTYPES, help="cast the weights at load")
    add("--blas", default="auto", choices=blas.MODES, help="see protocol/launch/blas.py")
    add("--prefix-cache-bytes", type=int, default=DEFAULT_PREFIX_CACHE_BYTES, help="0: off")
    add("--ssd-cache-dir", help="directory of the prefix cache's SSD tier")
    add("--ssd-cache-max-gb", type=float, default=16.0)
    add("--warm-prompts", help="file of prompts prefilled into the prefix cache at start")


def check_generation_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    from worker.text.speculation.config import (
        METHODS,
        check_draft_tokens,
        check_lookup_sizes,
    )

    if args.prefill_step_size < 1:
        parser.error("--prefill-step-size must be at least 1")
    if args.speculative not in METHODS:
        parser.error(f"--speculative must be one of {', '.join(METHODS)}")
    complaint = check_draft_tokens(args.num_draft_tokens) or check_lookup_sizes(
        args.prompt_lookup_min, args.prompt_lookup_max
    )
    if complaint:
        parser.error(complaint)
    if args.quantized_kv_start < 0:
        parser.error("--quantized-kv-start must be >= 0")
    # mlx-lm's rotating cache keeps the first 4 tokens.
    if args.max_kv_size is not None and args.max_kv_size <= 4:
        parser.error("--max-kv-size must be more than 4")
    if args.prefix_cache_bytes < 0 or args.ssd_cache_max_gb < 0:
        parser.error("cache sizes must be >= 0")
    if args.prefill_interleave is not None and not args.prefill_interleave >= 0:
        parser.error("--prefill-interleave must be >= 0")
    if args.max_loras < 0:
        parser.error("--max-loras must be >= 0")
    for entry in args.lora:
        name, _, path = entry.partition("=")
        if not name or not path:
            parser.error(f"--lora takes NAME=PATH, not {entry!r}")


def check_blas(mode: str) -> None:
    """Logs which BLAS this process got; refuses to go on without the one it must have."""
    if mode == "openblas" and blas.loaded_openblas() is None:
        raise blas.BlasUnavailable(
            "--blas openblas, but OpenBLAS is not loaded in the worker (start it through the "
            "gateway, or with LD_PRELOAD=<path of libopenblas.so.0>)"
        )
    log.info(blas.describe(mode))


def generation_settings(args: argparse.Namespace) -> Any:
    from worker.text.settings import GenerationSettings
    from worker.text.speculation.config import DRAFT_TOKENS

    return GenerationSettings(
        prefill_step_size=args.prefill_step_size,
        num_draft_tokens=args.num_draft_tokens or DRAFT_TOKENS["draft"],
        kv_bits=args.kv_bits,
        kv_group_size=args.kv_group_size,
        quantized_kv_start=args.quantized_kv_start,
        max_kv_size=args.max_kv_size,
    )


@dataclass(frozen=True)
class TextEngineSetup:
    engine: Any  # worker.runtime.engine.Engine
    model: Any  # the mlx.nn.Module it runs
    tokenizer: Any  # mlx-lm's TokenizerWrapper
    prefix: Any  # worker.text.prefix_reuse.PrefixReuse: close() it at exit


def build_text_engine(args: argparse.Namespace, sharder: Any = None) -> TextEngineSetup:
    """Loads the checkpoint (raises on any failure) and builds the text engine for `args`;
    `sharder` (worker/distributed/sharding.py) splits it across a distributed group."""
    from worker.text.adapters.registry import Adapters
    from worker.text.batch_engine import BatchTextEngine
    from worker.text.chat_template import replace_chat_template
    from worker.text.model import load_text_model
    from worker.text.prefix_reuse import PrefixReuse, open_prefix_cache
    from worker.text.solo_engine import SoloTextEngine

    settings = generation_settings(args)
    text_model = load_text_model(
        args.model,
        dtype=args.dtype,
        draft_path=args.draft_model,
        adapter_path=args.adapter_path,
        shard=sharder,
    )
    if getattr(args, "chat_template", None) is not None:
        replace_chat_template(text_model.tokenizer, args.chat_template)
    if sharder is None:  # a distributed group's ranks would not change adapters together
        text_model = replace(text_model, adapters=Adapters(text_model.model, args.max_loras))
    cache_bytes = args.prefix_cache_bytes
    if sharder is not None:
        cache_bytes = sharder.local_bytes(cache_bytes)
    if settings.kv_bits is not None:
        for model in (text_model.model, text_model.draft_model):
            check_kv_group_size(model, settings.kv_group_size)
    cache_settings = {
        "dtype": args.dtype,
        "draft": args.draft_model,
        "kv_bits": settings.kv_bits,
        "kv_group_size": settings.kv_group_size,
        "quantized_kv_start": settings.quantized_kv_start,
        "max_kv_size": settings.max_kv_size,
    }
    if args.draft_model:
        cache_settings["draft_key"] = _model_key(args.draft_model)
    prefix = PrefixReuse(
        open_prefix_cache(
            cache_bytes,
            args.model,
            cache_settings,
            ssd_dir=args.ssd_cache_dir,
            ssd_max_bytes=int(args.ssd_cache_max_gb * 2**30),
        )
    )
    blocker = settings.batch_path_blocker()
    speculation = speculation_for(args, text_model, blocker, distributed=sharder is not None)
    if blocker is None and text_model.draft_model is not None and speculation.method != "draft":
        # auto, where a draft cannot run in the batch (a distributed group, a cache that cannot
        # be rewound): mlx-lm's speculative generator serves it on the batch-1 path, as before.
        blocker = "a draft model that cannot speculate inside the batch"
    if blocker is None:
        pacer = prefill_pacer(args.prefill_interleave, settings, distributed=sharder is not None)
        engine: Any = BatchTextEngine(
            text_model, settings, args.max_num_seqs, prefix, pacer, speculation=speculation
        )
        log.info(
            "continuous batching: up to %d requests at once; speculative decoding: %s",
            args.max_num_seqs,
            describe_speculation(speculation),
        )
    else:
        engine = SoloTextEngine(text_model, settings, prefix)
        log.info("batch-1 generation interleaved round robin, because of %s", blocker)
    if text_model.adapters is not None:
        # The batch-1 engine runs one request per model call: its rows never mix adapters.
        text_model.adapters.mixes_rows = isinstance(engine, BatchTextEngine)
        load_startup_adapters(text_model.adapters, args.lora)
    if args.warm_prompts:
        warm(text_model, prefix, args.warm_prompts, settings)
    return TextEngineSetup(engine, text_model.model, text_model.tokenizer, prefix)


def load_startup_adapters(adapters: Any, entries: list[str]) -> None:
    """Loads the --lora adapters (NAME=PATH); one that cannot load is logged and left out (a
    worker restarted by the gateway must come up without it)."""
    from worker.text.adapters.files import AdapterError

    for entry in entries:
        name, _, path = entry.partition("=")
        try:
            adapters.load(name, path)
        except AdapterError as exc:
            log.error("the LoRA adapter %s is not served: %s", name, exc)


def speculation_for(
    args: argparse.Namespace, text_model: Any, blocker: str | None, distributed: bool
) -> Any:
    """The batch engine's speculation for --speculative (raises SpeculationError, naming why,
    where it was asked for and cannot run)."""
    from worker.text.speculation.config import cache_problem, resolve

    if text_model.draft_model is not None and blocker is not None:
        # The batch-1 path the blocker sends generation to runs the draft itself.
        return resolve("none", has_draft=False, batch_path_blocker=None, distributed=False,
                       cache_problem=None, num_draft_tokens=args.num_draft_tokens)  # fmt: skip
    return resolve(
        args.speculative,
        has_draft=text_model.draft_model is not None,
        batch_path_blocker=blocker,
        distributed=distributed,
        cache_problem=cache_problem(text_model.model, text_model.draft_model),
        num_draft_tokens=args.num_draft_tokens,
        lookup_min=args.prompt_lookup_min,
        lookup_max=args.prompt_lookup_max,
    )


def describe_speculation(speculation: Any) -> str:
    if not speculation.enabled:
        return "off"
    if speculation.method == "ngram":
        return (
            f"prompt lookup ({speculation.lookup_max}- to {speculation.lookup_min}-grams), "
            f"up to {speculation.num_draft_tokens} tokens"
        )
    return f"draft model, up to {speculation.num_draft_tokens} tokens"


def prefill_pacer(ratio: float | None, settings: Any, distributed: bool) -> Any:
    """The batch engine's PrefillPacer for --prefill-interleave. A distributed group's ranks
    must all choose the same chunks, and the pacer follows each rank's own clock: unpaced."""
    from worker.text.prefill_pacing import DEFAULT_RATIO, PrefillPacer

    if distributed and ratio:
        raise ValueError("--prefill-interleave: a distributed group prefills unpaced (use 0)")
    if ratio is None:
        ratio = 0.0 if distributed else DEFAULT_RATIO
    return PrefillPacer(settings.prefill_step_size, ratio)


def warm(text_model: Any, prefix: Any, path: str, settings: Any) -> int:
    """Prefills the prompts of `--warm-prompts` into the prefix cache (worker/cache/warm_prompts.py);
    a prompt the model cannot take (e.g. its chat template refuses it) is logged and skipped."""
    from mlx_lm.models.cache import make_prompt_cache

    from protocol.launch.warm_prompts import load_warm_prompts
    from worker.cache.warm_prompts import warm_prefix_cache
    from worker.runtime.errors import RequestError
    from worker.text.prompts import prompt_for

    if not prefix.enabled or settings.max_kv_size is not None:
        log.warning("--warm-prompts %s ignored: no prefix cache to warm", path)
        return 0
    token_lists = []
    for prompt in load_warm_prompts(path):
        try:
            token_lists.append(prompt_for(text_model, prompt.inputs))
        except RequestError as exc:
            log.warning("%s line %d skipped: %s", path, prompt.line, exc.message)
    model, draft = text_model.model, text_model.draft_model
    layers = len(model.layers)

    def run(chunk: Any, cache: list[Any]) -> None:
        # With a draft model a cache entry holds the model's layers, then the draft's.
        model(chunk, cache=cache[:layers])
        if draft is not None:
            draft(chunk, cache=cache[layers:])

    def make_cache() -> list[Any]:
        return make_prompt_cache(model) + (make_prompt_cache(draft) if draft is not None else [])

    computed = warm_prefix_cache(
        prefix.cache, run, token_lists, make_cache, settings.prefill_step_size
    )
    log.info("warmed the prefix cache: %d prompts, %d tokens prefilled", len(token_lists), computed)
    return len(token_lists)


def check_kv_group_size(model: Any, group_size: int) -> None:
    """KV quantization groups run along the head dimension: refuse at start what would fail
    every request."""
    model_args = getattr(model, "args", None)
    head_dim = getattr(model_args, "head_dim", None)
    if head_dim is None and model_args is not None:
        hidden = getattr(model_args, "hidden_size", None)
        heads = getattr(model_args, "num_attention_heads", None)
        head_dim = hidden // heads if hidden and heads else None
    if head_dim and head_dim % group_size:
        raise ValueError(
            f"--kv-group-size {group_size} does not divide the model's attention head size "
            f"{head_dim}; use --kv-group-size 32 (or another divisor)"
        )


def _model_key(path: str) -> str:
    from worker.cache.prefix_cache import model_key

    return model_key(path)

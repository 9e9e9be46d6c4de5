"""Server configuration: everything `vllm-omni-mlx serve` decides, in one frozen dataclass."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.mcp.config import McpServer


@dataclass(frozen=True, slots=True)
class ServerConfig:
    model: str  # local checkpoint directory (hub ids are resolved by the CLI before this)
    served_model_name: str  # the id clients send as "model" and /v1/models lists
    host: str = "127.0.0.1"
    port: int = 8000
    api_keys: tuple[str, ...] = ()  # any of them opens the API; none: an open server
    admin_key: str | None = None  # /v1/admin/models/*: gateway/http/auth.py
    allowed_origins: tuple[str, ...] = ()  # CORS (gateway/cli/listening.py); none: off
    mcp_servers: tuple[McpServer, ...] = ()  # --mcp-config: the MCP servers requests may use
    model_root: str | None = None  # admin loads: checkpoints under this directory only
    max_tokens: int = 2048  # default when a request gives no max_tokens
    max_num_seqs: int = 8  # requests the worker generates at once
    max_queue: int = 64  # requests waiting for admission; past it: 503 + Retry-After
    max_realtime_sessions: int = 8  # open /v1/realtime sessions; 0: the endpoint is off
    queue_timeout: float = 60.0  # seconds a request may wait for admission
    max_body_bytes: int = 16 * 1024 * 1024
    # Seconds a request may take to send its headers, then its body (gateway/http/read_deadlines.py)
    header_timeout: float = 15.0
    body_timeout: float = 30.0
    sse_keepalive: float = 3.0  # seconds of silence after which a stream writes a keepalive
    # Spoken answers: the first phrase ends after at most this many words (or at a clause
    # boundary), so speech starts sooner; 0: at the first sentence end (gateway/audio/speech/phrases.py)
    first_phrase_words: int = 6
    drain_timeout: float = 30.0  # model swap: seconds in-flight requests may finish
    ready_timeout: float = 600.0  # seconds a worker may take from spawn to READY
    heartbeat_interval: float = 0.5
    heartbeat_timeout: float = 30.0  # silence after which a worker is declared dead
    # A worker that was ready once is restarted after every crash, with backoff doubling per
    # crash within restart_window up to restart_backoff_max; max_restarts (None: never) crashes
    # within the window give up.
    max_restarts: int | None = None
    restart_window: float = 120.0
    restart_backoff_max: float = 30.0
    # A worker on another host (`vllm-omni-mlx worker --listen`): the gateway connects to this
    # tcp://HOST:PORT (and PORT + 1) instead of spawning a worker; CURVE keys from keys_dir
    # (protocol/launch/curve_keys.py), or plain TCP when insecure.
    remote: str | None = None
    keys_dir: str | None = None
    insecure: bool = False
    # One model split across the ranks of an MLX distributed group (docs/distributed.md),
    # started by mlx.launch: the hosts of an mlx.launch hostfile, or `ranks` on this host.
    distributed_hostfile: str | None = None
    ranks: int | None = None
    parallel: str = "auto"  # auto | tensor | pipeline
    distributed_backend: str | None = None  # ring | jaccl | mpi | nccl; None: mlx.launch's
    log_level: str = "info"
    log_format: str = "text"  # text | json (protocol/log_format.py), gateway and worker alike
    log_polls: bool = False  # access-log GET /health and /metrics too (monitors poll them)
    # Generation, passed to the worker as flags of the same names (worker/text/args.py).
    prefill_step_size: int = 2048  # prompt tokens per prefill chunk
    # Beside decoding streams a prefill chunk takes at most this many times their decode step
    # (worker/text/prefill_pacing.py); None: the worker's default (0.7; 0 in a distributed group).
    prefill_interleave: float | None = None
    draft_model: str | None = None  # checkpoint directory: speculative decoding
    adapter_path: str | None = None  # an mlx-lm LoRA adapter directory (models file: adapter)
    # LoRA adapters served beside the model, chosen per request by name: (name, directory).
    # Given as --lora-modules, then what /v1/load_lora_adapter and /v1/unload_lora_adapter
    # changed, so a restarted worker loads them again (worker/text/adapters/).
    lora_modules: tuple[tuple[str, str], ...] = ()
    max_loras: int = 8  # adapters loaded at once, at most
    # Proposals per sequence and step; None: by method (prompt lookup 5, a draft model 3)
    num_draft_tokens: int | None = None
    # Speculative decoding in continuous batching (worker/text/speculation/): none | ngram
    # (prompt lookup) | draft (--draft-model) | auto: the draft model, else prompt lookup, where
    # speculation can run (measured: docs/benchmarks.md, "Speculative decoding").
    speculative: str = "auto"
    prompt_lookup_min: int = 2  # the n-gram sizes prompt lookup matches, longest first
    prompt_lookup_max: int = 8
    kv_bits: int | None = None  # quantized KV cache
    kv_group_size: int = 64
    quantized_kv_start: int = 5000
    max_kv_size: int | None = None  # rotating KV cache
    dtype: str = "auto"  # auto | float32 | float16 | bfloat16: cast the weights at load
    blas: str = "auto"  # auto | bundled | openblas (Linux CPU; protocol/launch/blas.py)
    prefix_cache_bytes: int = 2 << 30  # 0: no prefix cache in memory
    ssd_cache_dir: str | None = None  # prefix cache entries also on disk, here
    ssd_cache_max_gb: float = 16.0
    warm_prompts: str | None = None  # JSON Lines of prompts prefilled into the cache at start
    # Engines next to (or instead of) the text model, and output parsing of the text model.
    speech_model: str | None = None  # a TTS checkpoint served next to the main model
    transcription_model: str | None = None  # a speech-recognition checkpoint served next to it
    omni: bool = False  # the main model is a speech model (TTS or speech recognition)
    reasoning_parser: str = "auto"  # auto | none | qwen3 | deepseek_r1
    tool_call_parser: str = "auto"  # auto | none | a format of worker/text/parsers/registry.py
    chat_template: str | None = None  # a Jinja file replacing the checkpoint's template
    backend: str = "auto"  # auto | text | omni: mlx-lm or mlx-vlm for the main model
    vision_cache_entries: int = 20  # image feature sets reused by content (mlx-vlm); 0: none
    talker_max_frames: int = 4096  # codec frames (12.5 a second) Qwen3-Omni's talker may speak
    voice_cache_bytes: int = 64 << 20  # Qwen3-TTS voices' prefix KV and references kept; 0: none
    # Embeddings (worker/embedding/): a model next to the main one, request limits, pass size.
    embedding_model: str | None = None  # an embedding checkpoint served next to the main model
    rerank_model: str | None = None  # a reranker (cross-encoder or LLM) next to the main model
    image_model: str | None = None  # an image-generation checkpoint next to the main model
    video_model: str | None = None  # a video-generation checkpoint next to the main model
    max_embedding_inputs: int = 2048  # inputs of one /v1/embeddings request (OpenAI's limit)
    max_embedding_tokens: int = 300_000  # tokens of one request, all inputs (OpenAI's limit)
    embedding_batch_tokens: int = 8192  # padded tokens of one embedding forward pass
    # Images and audio in chat requests, checked by the gateway (gateway/media/).
    allowed_local_media_path: str | None = None  # file:// and paths allowed inside this dir
    media_max_bytes: int = 20 * 2**20  # per image / audio clip, fetched or inline
    media_fetch_timeout: float = 10.0  # seconds per remote fetch, redirects included
    max_image_pixels: int = 40_000_000  # width x height, checked before decoding
    # Other names clients may send: workers/served_models.py, audio/speech/voice_aliases.py.
    model_aliases: tuple[str, ...] = ()  # --model-alias globs that reach the main model
    voice_aliases: tuple[tuple[str, str], ...] = ()  # --voice-alias (NAME, VOICE) overrides

"""Direct mlx-lm and mlx-audio calls in a child process that has the worker's BLAS.

A server started with the default `--blas auto` runs its worker with OpenBLAS preloaded
(protocol/launch/blas.py); the test process has the mlx wheel's reference BLAS, whose float32 matmuls
are ~30x slower and round differently. Real weights make both matter: a direct run in the
test process would take minutes, and a near tie between two tokens could go either way.
`DirectProcess` runs the references in `python -m tests.support.direct_process` with the
environment the gateway gives its worker (`blas_environment("auto", ...)`), one JSON request
per line on stdin, one JSON reply per line on stdout; models stay loaded between calls.

Operations (what a user of the library writes, nothing of the server's code):
- `chat`: the checkpoint's chat template (generation prompt on), mlx-lm's `stream_generate`
  with a greedy sampler: the text, the token ids it yields (the eos too, which the server
  counts and gives a logprob), each token's text (`tokenizer.decode([id])`, what the server's
  logprobs carry), the prompt's length and the finish reason.
- `transcribe`: mlx-audio's Whisper loader and `generate(file, **options)`. With
  `dtype="float32"` the model is built the way mlx-audio's loader builds it (config ->
  `Model(dims, dtype)` -> sanitize -> load_weights -> post_load_hook), with float32 for the
  float16 it always passes, and decodes with `fp16=False`.
- `kokoro`: mlx-audio's loader and, per chunk of phonemes, its Kokoro model called as its
  pipeline calls it (`KokoroPipeline.infer`: `model(phonemes, pack[len(phonemes) - 1],
  speed)`), after `mx.random.seed(seed)`; the audio as the float samples or as int16 PCM. With
  `fast`, its decoder has the worker's faster CPU operations (worker/speech/kokoro_fast.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from protocol.launch.blas import blas_environment

ROOT = Path(__file__).resolve().parents[2]


class DirectError(RuntimeError):
    """The child failed a call (its traceback is in the message) or died."""


class DirectProcess:
    """The child process; `call(op, **fields)` returns its JSON reply. Thread-safe (calls are
    serialized), so a test may run a reference while a server request is in flight."""

    def __init__(self, log_path: Path) -> None:
        env = blas_environment("auto", os.environ)
        env["HF_HUB_OFFLINE"] = "1"
        env["PYTHONUNBUFFERED"] = "1"
        self._log = open(log_path, "wb")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.direct_process"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
        )
        self._lock = threading.Lock()
        self.log_path = log_path

    def call(self, op: str, **fields: Any) -> dict[str, Any]:
        with self._lock:
            assert self._proc.stdin is not None and self._proc.stdout is not None
            self._proc.stdin.write(json.dumps({"op": op, **fields}).encode() + b"\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        if not line:
            raise DirectError(f"the direct process died:\n{self.log_path.read_text()[-4000:]}")
        reply = json.loads(line)
        if "error" in reply:
            raise DirectError(reply["error"])
        return reply

    def chat(
        self, path: str, messages: list[dict], max_tokens: int, tools: list[dict] | None = None
    ) -> dict[str, Any]:
        return self.call("chat", path=path, messages=messages, max_tokens=max_tokens, tools=tools)

    def transcribe(self, path: str, file: Path, dtype: str = "auto", **options) -> dict[str, Any]:
        return self.call("transcribe", path=path, file=str(file), dtype=dtype, options=options)

    def kokoro(self, path: str, chunks: list[str], voice: str, seed: int, **options: Any) -> bytes:
        import base64

        reply = self.call("kokoro", path=path, chunks=chunks, voice=voice, seed=seed, **options)
        return base64.b64decode(reply["audio"])

    def close(self) -> None:
        if self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._log.close()


# -- the child -----------------------------------------------------------------------------

_models: dict[tuple[str, str], Any] = {}


def _lm(path: str):
    if ("lm", path) not in _models:
        from mlx_lm import load

        _models["lm", path] = load(path)
    return _models["lm", path]


def _chat(
    path: str, messages: list[dict], max_tokens: int, tools: list[dict] | None = None
) -> dict[str, Any]:
    from mlx_lm import stream_generate
    from mlx_lm.sample_utils import make_sampler

    model, tokenizer = _lm(path)
    prompt = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True)
    tokens, text, last = [], "", None
    for last in stream_generate(
        model, tokenizer, prompt, max_tokens=max_tokens, sampler=make_sampler(0.0)
    ):
        text += last.text
        tokens.append(last.token)  # the last one is the eos when the reason is "stop"
    assert last is not None
    return {
        "text": text,
        "tokens": tokens,
        "token_texts": [tokenizer.decode([t]) for t in tokens],
        "prompt_tokens": last.prompt_tokens,
        "finish_reason": last.finish_reason,
    }


def _whisper(path: str, dtype: str):
    if (path, dtype) in _models:
        return _models[path, dtype]
    if dtype == "auto":
        from mlx_audio.stt import load

        model = load(path)
    elif dtype == "float32":
        import mlx.core as mx
        from mlx_audio.stt.models.whisper.whisper import Model, ModelDimensions
        from mlx_audio.utils import load_weights

        config = json.loads((Path(path) / "config.json").read_text())
        model = Model(ModelDimensions.from_dict(config), mx.float32)
        model.load_weights(list(model.sanitize(load_weights(Path(path))).items()), strict=True)
        mx.eval(model.parameters())
        model.eval()
        model = Model.post_load_hook(model, Path(path))
    else:
        raise ValueError(f"dtype {dtype!r}: auto or float32")
    _models[path, dtype] = model
    return model


def _transcribe(path: str, file: str, dtype: str, options: dict[str, Any]) -> dict[str, Any]:
    model = _whisper(path, dtype)
    if dtype == "float32":
        options = {**options, "fp16": False}
    result = model.generate(file, **options)
    segments = [[s["start"], s["end"], s["text"]] for s in result.segments]
    return {"text": result.text.strip(), "language": result.language, "segments": segments}


def _kokoro(path: str, chunks: list[str], voice: str, seed: int, speed: float = 1.0,
            pcm16: bool = True, fast: bool = False) -> dict[str, Any]:  # fmt: skip
    import base64

    import mlx.core as mx
    import numpy as np

    from worker.speech import kokoro_fast, kokoro_weights

    kokoro_fast.install() if fast else kokoro_fast.uninstall()
    kokoro_weights.uninstall()  # weights normalized on every call, as mlx-audio does

    if ("kokoro", path) not in _models:
        from mlx_audio.tts.utils import load_model

        _models["kokoro", path] = load_model(Path(path))
    model = _models["kokoro", path]
    pack = mx.load(str(Path(path) / "voices" / f"{voice}.safetensors"))["voice"]
    mx.random.seed(seed)
    audio = [
        np.asarray(model(ps, pack[len(ps) - 1], speed, return_output=True).audio[0], np.float32)
        for ps in chunks
    ]
    joined = np.concatenate(audio)
    if pcm16:  # as the worker sends it (worker/speech/audio.py)
        from worker.speech.audio import to_pcm16

        data = b"".join(to_pcm16(a) for a in audio)
    else:
        data = joined.tobytes()
    return {"audio": base64.b64encode(data).decode(), "samples": int(joined.size)}


def main() -> None:
    import traceback

    # Replies go to the original stdout; whatever the libraries print goes to stderr (the log).
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    ops = {"chat": _chat, "transcribe": _transcribe, "kokoro": _kokoro}
    for line in sys.stdin:
        request = json.loads(line)
        op = ops[request.pop("op")]
        try:
            reply = op(**request)
        except Exception:
            reply = {"error": traceback.format_exc()}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


if __name__ == "__main__":
    main()

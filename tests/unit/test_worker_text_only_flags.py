"""Flags only an mlx-lm text model honours are refused at load for any other main model,
naming the flag, instead of being ignored (worker/runtime/loading.py)."""

from __future__ import annotations

import pytest

from worker.runtime.loading import load_engines
from worker.runtime.process import parse_args
from worker.tiny_models import ensure_checkpoint

SOCKETS = ["--to-worker", "ipc:///tmp/unused-a", "--from-worker", "ipc:///tmp/unused-b",
           "--parent-pid", "1"]  # fmt: skip


def worker_args(*argv: str):
    return parse_args([*argv, *SOCKETS])


@pytest.mark.parametrize(
    "flags, named",
    [
        (["--speculative", "ngram"], "--speculative ngram"),
        (["--speculative", "draft"], "--speculative draft"),
        (["--chat-template", "t.jinja"], "--chat-template"),
    ],
)
@pytest.mark.parametrize("kind", ["qwen2_vl", "whisper"])
def test_a_text_only_flag_for_another_model_is_refused_naming_it(kind, flags, named):
    args = worker_args("--model", str(ensure_checkpoint(kind)), *flags)
    with pytest.raises(ValueError, match=named):
        load_engines(args)


def test_the_default_speculation_is_no_flag_to_refuse():
    args = worker_args("--model", str(ensure_checkpoint("whisper")))
    assert args.speculative in ("auto", "none")
    assert load_engines(args).transcription is not None

"""Where one Qwen3-TTS codec frame's time goes: the talker's step, the code predictor's 15
steps (mlx-audio's, then compiled: worker/speech/qwen3_compiled.py), and the codec decoding the
frame, stock and in the worker's faster CPU forms (worker/speech/qwen3_codec_fast.py), one
frame a call and `--frames` a call (a chunk of the worker's growing schedule).

    LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libopenblas.so.0 python -m scripts.profile_qwen3_tts_frame \
        --model $(python -m worker.tiny_models --arch qwen3_tts --size real | tail -1)

Each part is evaluated on its own (mx.eval after it), on random inputs of the real shapes; the
best of `--rounds` is printed, in seconds. The codec decodes `--frames` frames streamed one at
a time from a reset state (per frame), stock then fast, and their largest difference is shown.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable


def best(rounds: int, run: Callable[[], object]) -> float:
    run()  # first-call allocations
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="a Qwen3-TTS checkpoint")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--frames", type=int, default=3)
    args = parser.parse_args(argv)

    import mlx.core as mx
    from mlx_audio.tts.utils import load_model

    from worker.speech import qwen3_codec_fast, qwen3_compiled
    from worker.speech.staged import unwrap_decoder

    model = load_model(args.model)
    talker, width = model.talker, model.config.talker_config.hidden_size
    cache = talker.make_cache()
    mx.eval(talker(mx.random.normal((1, 30, width)), cache=cache))
    offset = cache[0].offset

    def talker_step() -> None:
        logits, hidden = talker(mx.random.normal((1, 1, width)), cache=cache)
        mx.eval(logits, hidden)
        for layer in cache:  # back to the 30-position prompt for the next round
            layer.offset = offset

    def predictor_steps() -> None:
        predictor = talker.code_predictor  # mlx-audio's, or the compiled stand-in
        code_cache = predictor.make_cache()
        x = mx.random.normal((1, 2, width))
        for step in range(model.config.talker_config.num_code_groups - 1):
            logits, code_cache, _ = predictor(x, cache=code_cache, generation_step=step)
            token = mx.argmax(logits[:, -1:], axis=-1)
            x = predictor.codec_embedding[step](token)
            mx.eval(x)

    decoder = unwrap_decoder(model.speech_tokenizer.decoder)
    audio: list = []

    chunk = [1]  # frames a streaming_step call decodes

    def decode() -> None:
        decoder.reset_streaming_state()
        codes = mx.concatenate(
            [mx.full((1, 16, 1), 7 * f + 3, mx.int32) for f in range(args.frames)], axis=2
        )
        chunks = [
            decoder.streaming_step(codes[:, :, at : at + chunk[0]])
            for at in range(0, args.frames, chunk[0])
        ]
        audio[:] = [mx.concatenate(chunks, axis=-1)]
        mx.eval(audio[0])

    print(f"talker step: {best(args.rounds, talker_step):.3f} s")
    stock_predictor = best(args.rounds, predictor_steps)
    print(f"code predictor, 15 steps: {stock_predictor:.3f} s")
    qwen3_compiled.install(model)
    compiled = best(args.rounds, predictor_steps)
    print(
        f"code predictor, 15 steps compiled: {compiled:.3f} s ({stock_predictor / compiled:.2f}x)"
    )
    qwen3_codec_fast.uninstall(decoder)
    stock = best(args.rounds, decode) / args.frames
    stock_audio = audio[0]
    qwen3_codec_fast.install(decoder)
    fast = best(args.rounds, decode) / args.frames
    difference = float(mx.abs(audio[0] - stock_audio).max())
    print(f"codec, a frame: stock {stock:.3f} s, fast forms {fast:.3f} s ({stock / fast:.1f}x)")
    chunk[0] = args.frames
    grouped = best(args.rounds, decode) / args.frames
    print(
        f"codec, a frame, fast forms, {args.frames} frames a call: {grouped:.3f} s "
        f"({fast / grouped:.2f}x one a call)"
    )
    print(f"largest difference of the audio: {difference:.2e} (full scale 1)")


if __name__ == "__main__":
    main()

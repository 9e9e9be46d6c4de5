"""The image engine (worker/images/) in-process on tiny random-weight checkpoints of two
mlx-vlm families: pictures equal direct `generate_image` / `edit_image` pixel for pixel, also
with requests interleaved step by step; previews come before their picture; an abort stops a
run between steps; bad input is a bad_request naming the field before any work."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from protocol.inputs import ImageInputs
from protocol.messages import Delta, ErrorCode, FinishReason, Submit
from tests.support.image_direct import direct_picture
from tests.support.vision import png_header_only
from worker.images.engine import ImageEngine, load_image_engine
from worker.runtime.stats import WorkerStats
from worker.tiny_models import ensure_checkpoint

PROMPT = "a red fox in the snow"


@pytest.fixture(scope="module")
def z_image() -> str:
    return str(ensure_checkpoint("z_image", "tiny"))


@pytest.fixture(scope="module")
def moss() -> str:
    return str(ensure_checkpoint("moss_image", "tiny"))


@pytest.fixture(scope="module")
def z_engine(z_image) -> ImageEngine:
    return load_image_engine(z_image)


@pytest.fixture(scope="module")
def moss_engine(moss) -> ImageEngine:
    return load_image_engine(moss)


def direct(path: str, seed: int, steps: int, size: int = 64, source: str | None = None):
    return direct_picture(path, PROMPT, seed, steps, size, source)


def run(engine: ImageEngine, *submits: Submit) -> dict[str, list[Delta]]:
    """Admit every submit, then step until all ended: each request's deltas in order."""
    out: dict[str, list[Delta]] = {}
    for submit in submits:
        accepted = engine.admit(submit)
        out[submit.request_id] = [accepted]
    while engine.active_ids():
        for delta in engine.step():
            out[delta.request_id].append(delta)
    return out


def pictures(deltas: list[Delta], previews: bool = False) -> list[np.ndarray]:
    return [
        np.frombuffer(p.pixels, np.uint8).reshape(p.height, p.width, 3)
        for d in deltas
        for p in d.images
        if (p.partial is not None) == previews
    ]


@pytest.mark.parametrize("family", ["z_image", "moss_image"])
def test_pictures_equal_direct_mlx_vlm_with_requests_interleaved(
    family, z_engine, moss_engine, z_image, moss
):
    engine, path = (z_engine, z_image) if family == "z_image" else (moss_engine, moss)
    first = Submit("a", ImageInputs(PROMPT, 64, 64, n=2, steps=4, seed=21), False)
    second = Submit("b", ImageInputs(PROMPT, 32, 48, steps=3, seed=5), False)
    out = run(engine, first, second)
    a, b = pictures(out["a"]), pictures(out["b"])
    assert np.array_equal(a[0], direct(path, 21, 4))
    assert np.array_equal(a[1], direct(path, 22, 4))
    assert b[0].shape == (48, 32, 3)
    from mlx_vlm.generate.image import (
        ImageGenerationRequest,
        generate_image,
        load_image_generation_model,
    )

    model = load_image_generation_model(path)
    alone = generate_image(
        model, ImageGenerationRequest(PROMPT, seed=5, steps=3, width=32, height=48)
    )
    assert np.array_equal(b[0], np.array(alone.array))
    terminal = out["a"][-1]
    assert terminal.finish_reason == FinishReason.STOP
    assert terminal.usage.prompt_tokens > 0 and terminal.usage.completion_tokens > 0


def test_previews_come_before_their_picture_and_steps_are_counted(z_engine):
    stats = WorkerStats("z")
    z_engine.bind_stats(stats)
    out = run(
        z_engine, Submit("p", ImageInputs(PROMPT, 64, 64, steps=7, seed=3, partial_images=3), False)
    )
    kinds = [(p.index, p.partial) for d in out["p"] for p in d.images]
    assert kinds == [(0, 0), (0, 1), (0, 2), (0, None)]
    assert stats.snapshot().image_steps == out["p"][-1].usage.completion_tokens == 6
    assert stats.snapshot().image_step_seconds > 0
    # Z-Image runs 3 denoising steps for 4 asked: both previews fit between them.
    few = run(
        z_engine, Submit("q", ImageInputs(PROMPT, 64, 64, steps=4, seed=3, partial_images=2), False)
    )
    assert [p.partial for d in few["q"] for p in d.images] == [0, 1, None]


def test_requests_take_turns_one_denoising_step_per_engine_step(z_engine):
    for rid in ("t1", "t2"):
        z_engine.admit(Submit(rid, ImageInputs(PROMPT, 64, 64, steps=20, seed=1), False))
    for _ in range(6):  # three turns each: the prompt's encoding, then two steps
        assert z_engine.step() == []
    ended = z_engine.abort(["t1", "t2"])
    assert [d.usage.completion_tokens for d in ended] == [2, 2]


def test_a_library_failure_mid_run_is_an_internal_error_not_a_bad_request(
    z_engine, monkeypatch, caplog
):
    def broken(job, index):
        raise ValueError("shapes do not match")

    monkeypatch.setattr(z_engine, "_generate", broken)
    out = run(z_engine, Submit("f", ImageInputs(PROMPT, 64, 64, steps=3, seed=1), False))
    terminal = out["f"][-1]
    assert terminal.finish_reason == FinishReason.ERROR
    assert terminal.error.code == ErrorCode.INTERNAL
    assert "image request f failed" in caplog.text


def test_an_abort_stops_the_run_between_steps(z_engine):
    z_engine.admit(Submit("x", ImageInputs(PROMPT, 64, 64, steps=50, seed=1), False))
    for _ in range(4):
        z_engine.step()
    ended = z_engine.abort(["x"])
    assert [d.finish_reason for d in ended] == [FinishReason.ABORT]
    assert 0 < ended[0].usage.completion_tokens < 10
    assert z_engine.active_ids() == []
    assert z_engine.step() == []


def test_an_edit_equals_direct_edit_image(z_engine, z_image, tmp_path, own_tempdir):
    picture = Image.fromarray((np.indices((72, 56)).sum(0) % 256).astype(np.uint8)).convert("RGB")
    source = tmp_path / "in.png"
    picture.save(source)
    out = run(
        z_engine,
        Submit("e", ImageInputs(PROMPT, 0, 0, steps=3, seed=8, image=source.read_bytes()), False),
    )
    got = pictures(out["e"])[0]
    assert [p.name for p in edit_files()] == []  # the picture's file went with the request
    assert got.shape == (64, 48, 3)  # 72 high, 56 wide: rounded down to multiples of 16
    assert np.array_equal(got, direct(z_image, 8, 3, source=str(source)))


def _refusal(engine: ImageEngine, inputs: ImageInputs) -> str:
    delta = engine.admit(Submit("bad", inputs, False))
    assert delta.finish_reason == FinishReason.ERROR and delta.error.code == ErrorCode.BAD_REQUEST
    assert delta.usage is not None
    return delta.error.message


def encoded(picture: Image.Image, kind: str = "PNG") -> bytes:
    buffer = io.BytesIO()
    picture.save(buffer, format=kind)
    return buffer.getvalue()


def edit_files() -> list[Path]:
    return list(Path(tempfile.gettempdir()).glob("vomlx-edit-*"))


@pytest.fixture
def own_tempdir(tmp_path, monkeypatch):
    """The engine's temporary files go to this test's own folder (tests run side by side)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def test_bad_input_is_refused_naming_the_field(z_engine, moss_engine, own_tempdir):
    png = io.BytesIO()
    Image.new("RGB", (64, 64)).save(png, format="PNG")
    wide = encoded(Image.new("RGB", (2100, 32)))
    cases = [
        (z_engine, ImageInputs(PROMPT, 72, 64), "size"),
        (z_engine, ImageInputs(PROMPT, 4096, 64), "size"),
        (z_engine, ImageInputs(PROMPT, 64, 64, steps=1), "steps"),
        (z_engine, ImageInputs(PROMPT, 64, 64, n=11), "n"),
        (z_engine, ImageInputs(PROMPT, 64, 64, partial_images=4), "partial_images"),
        (z_engine, ImageInputs(PROMPT, 64, 64, guidance=float("nan")), "guidance"),
        (z_engine, ImageInputs(" ", 64, 64), "prompt"),
        (z_engine, ImageInputs("word " * 700, 64, 64), "prompt"),
        (z_engine, ImageInputs(PROMPT, 64, 64, guidance=2.0), "guidance"),  # Turbo: 0 to 1
        (z_engine, ImageInputs(PROMPT, 0, 0, image=b"not a picture"), "image"),
        (
            z_engine,
            ImageInputs(PROMPT, 0, 0, image=encoded(Image.new("RGB", (64, 64)), "GIF")),
            "image",
        ),
        (z_engine, ImageInputs(PROMPT, 0, 0, image=png_header_only(9000, 9000)), "image"),
        (z_engine, ImageInputs(PROMPT, 0, 0, image=wide), "image"),  # auto: its own 2096 wide
        (z_engine, ImageInputs(PROMPT, 64, 4096, image=png.getvalue()), "size"),
        (moss_engine, ImageInputs(PROMPT, 64, 64, image=png.getvalue()), "image"),
    ]
    for engine, inputs, field in cases:
        assert _refusal(engine, inputs).startswith(f"{field}:"), field
    assert z_engine.active_ids() == [] and moss_engine.active_ids() == []
    assert edit_files() == []  # no picture left behind by a refused edit


def test_an_edit_whose_prompt_cannot_be_read_leaves_no_file_behind(
    z_engine, monkeypatch, own_tempdir
):
    def unreadable(prompt):
        raise RuntimeError("tokenizer failed")

    monkeypatch.setattr(z_engine.model, "prompt_tokens", unreadable)
    inputs = ImageInputs(PROMPT, 0, 0, image=encoded(Image.new("RGB", (64, 64))))
    with pytest.raises(RuntimeError):
        z_engine.admit(Submit("u", inputs, False))
    assert edit_files() == [] and z_engine.active_ids() == []


def test_a_cameras_mpo_jpeg_is_edited_as_its_first_frame(z_engine, z_image, tmp_path, own_tempdir):
    buffer = io.BytesIO()
    first = Image.fromarray((np.indices((48, 64)).sum(0) % 256).astype(np.uint8)).convert("RGB")
    first.save(buffer, format="MPO", save_all=True, append_images=[Image.new("RGB", (64, 48))])
    assert Image.open(io.BytesIO(buffer.getvalue())).format == "MPO"
    source = tmp_path / "photo.jpg"
    source.write_bytes(buffer.getvalue())
    inputs = ImageInputs(PROMPT, 0, 0, steps=3, seed=2, image=buffer.getvalue())
    got = pictures(run(z_engine, Submit("m", inputs, False))["m"])[0]
    assert np.array_equal(got, direct(z_image, 2, 3, source=str(source)))


def test_the_ready_info_says_turbo_takes_no_guidance_and_an_edits_default_steps(z_engine):
    info = z_engine.ready_info()
    assert info.max_guidance == 1.0
    assert info.default_edit_steps == z_engine.model.edit.default_sampling.steps

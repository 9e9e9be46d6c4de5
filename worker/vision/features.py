"""Reusing image features across requests: mlx-vlm's `VisionFeatureCache`, filled for more models.

`mlx_vlm.stream_generate(..., vision_cache=cache)` looks the request's preprocessed pixels up
(`processed_image_key`: a hash of the pixel values and the image grid) and, on a hit, hands
the cached features to the model as `cached_image_features`, skipping the vision tower. It
fills the cache itself only for models with an `encode_image(s)` method; Qwen2-VL,
Qwen2.5-VL and Gemma 3 have none, although their `get_input_embeddings` honours cached
features. For those, `prefill_features` runs the exact call their `get_input_embeddings`
makes and stores the result under the same key before `stream_generate` looks it up; the
features are thus the ones the model would have computed. Models with neither get no reuse.
Qwen3-VL is deliberately left out: given cached features, its `get_input_embeddings` skips
the deepstack features it otherwise adds to the first decoder layers, so a hit would change
the output. Requests' prefills interleave (worker/vision/paced.py): a request whose pictures
another one is encoding right now waits for those features instead of encoding them again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mlx_vlm.vision_cache import VisionFeatureCache, processed_image_key

from worker.vision.paced import StepRun

VISION_CACHE_ENTRIES = 20  # mlx-vlm's default


def _qwen_vl_features(model: Any, pixel_values: Any, kwargs: Mapping[str, Any]) -> Any:
    # What Qwen2(.5)-VL's get_input_embeddings computes when it gets no cached features.
    grid_thw = kwargs.get("image_grid_thw")
    if grid_thw is None:
        grid_thw = kwargs.get("video_grid_thw")
    dtype = model.vision_tower.patch_embed.proj.weight.dtype
    return model.vision_tower(pixel_values.astype(dtype), grid_thw, output_hidden_states=False)


def _gemma3_features(model: Any, pixel_values: Any, kwargs: Mapping[str, Any]) -> Any:
    # What Gemma 3's get_input_embeddings computes when it gets no cached features.
    dtype = model.language_model.model.embed_tokens.weight.dtype
    pixels = pixel_values.transpose(0, 2, 3, 1).astype(dtype)
    hidden_state, _, _ = model.vision_tower(pixels, output_hidden_states=True)
    return model.multi_modal_projector(hidden_state)


_ENCODERS: dict[str, Callable[[Any, Any, Mapping[str, Any]], Any]] = {
    "qwen2_vl": _qwen_vl_features,
    "qwen2_5_vl": _qwen_vl_features,
    "gemma3": _gemma3_features,
}


class CountingVisionCache(VisionFeatureCache):
    """mlx-vlm's image-feature cache, counting how many feature sets were computed (`encoded`,
    one per store) and served again (`hits`)."""

    def __init__(self, max_size: int = VISION_CACHE_ENTRIES) -> None:
        super().__init__(max_size)
        self.encoded = 0
        self.hits = 0
        self.encoding: set[str] = set()  # keys whose features a paused request is computing

    def get(self, image_source: Any) -> Any:
        found = super().get(image_source)
        if found is not None:
            self.hits += 1
        return found

    def put(self, image_source: Any, features: Any) -> None:
        self.encoded += 1
        super().put(image_source, features)


def prefill_features(
    cache: VisionFeatureCache, model: Any, tensors: Mapping[str, Any], has_images: bool
) -> None:
    """Stores the request's image features in `cache` when mlx-vlm would not (see above).

    `tensors` are the request's prepared inputs (pixel_values and the image_* metadata, as
    `stream_generate` receives them); the key is the one `stream_generate` computes."""
    import mlx.core as mx

    pixel_values = tensors.get("pixel_values")
    encoder = _ENCODERS.get(getattr(model.config, "model_type", ""))
    if not has_images or pixel_values is None or encoder is None:
        return
    if hasattr(model, "encode_images") or hasattr(model, "encode_image"):
        return  # stream_generate fills the cache itself
    metadata = {k: v for k, v in tensors.items() if k not in ("pixel_values", "input_ids")}
    key = processed_image_key(pixel_values, **metadata)
    encoding: set[str] = getattr(cache, "encoding", set())
    run = StepRun.current()
    while run is not None and key in encoding and key not in cache:
        run.wait()  # another request is encoding these pictures (or gives up: then ours)
    if key in cache:
        return
    encoding.add(key)
    try:
        features = encoder(model, pixel_values, tensors)
        mx.eval(features)
        cache.put(key, features)
    finally:
        encoding.discard(key)

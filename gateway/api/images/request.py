"""Images API bodies -> an `ImageCall`, or a 400 naming the field.

`/v1/images/generations` takes JSON (`GENERATION`); `/v1/images/edits` takes OpenAI's
multipart form (`EDIT`: the same text fields as parts, the picture as the `image` file part,
`image[]` as the SDKs send a list) or its JSON shape (`EDIT_JSON`: the picture as
`images[0].image_url`, an https or data: URL resolved under the server's media rules; a
`file_id` is a 400, there is no Files API here). Honoured: `prompt`, `model`, `n`, `size` (`WIDTHxHEIGHT`, or
`auto`: 1024x1024 for a generation, the picture's own size for an edit), `quality` (the
model's default steps for `auto`, `standard` and `medium`; half for `low`; double for `high`
and `hd`, at most `MAX_STEPS`), `response_format` (`b64_json`, the default here, or `url`: a
`data:` URL of the picture), `output_format`, `output_compression` (jpeg and webp),
`stream` and `partial_images`, and the extensions `seed` (picture i is made with seed + i),
`num_inference_steps` (overrides `quality`) and `guidance_scale`. `background` takes `auto`
and `opaque` (pictures here have no alpha; `transparent` is a 400); `input_fidelity` takes
`low`. Accepted with no local meaning: `moderation`, `user`. Refused by name: `style`
(DALL-E 3's look) and `mask` (no family served here edits inside a mask).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.http.errors import invalid, unknown_field, unsupported
from gateway.http.multipart import Form, form_value
from gateway.schema import field as s
from gateway.schema.readers import boolean, integer, number, string
from gateway.schema.request import RequestSchema
from protocol.inputs import MAX_SEED, ImageInputs
from protocol.ready import ImageInfo

DEFAULT_SIDE = 1024  # `size: auto` of a generation (clipped to the model's largest side)
QUALITIES = ("auto", "standard", "medium", "low", "high", "hd")
FORMATS = ("png", "jpeg", "webp")
IMAGE_FILES = ("image", "image[]")
MAX_PROMPT_CHARS = 32000  # OpenAI's bound (gpt-image-1); the worker also bounds its tokens


def _not_transparent(body: dict, name: str) -> None:
    if body.get(name) == "transparent":
        raise unsupported(name, "transparent backgrounds (pictures here have no alpha channel)")
    if body.get(name) not in (None, "auto", "opaque"):
        raise invalid(name, f"`{name}` must be auto, opaque or transparent")


def _low_fidelity(body: dict, name: str) -> None:
    if body.get(name) not in (None, "low"):
        raise unsupported(name, "high input fidelity")


def _no_mask(body: dict, name: str) -> None:
    if body.get(name) is not None:
        raise unsupported(
            name, "masked edits (the image models served here edit the whole picture)"
        )


_COMMON = {
    "prompt": s.string(
        "What to draw, or how to change the picture.", minLength=1, maxLength=MAX_PROMPT_CHARS
    ),
    "model": s.string(
        "The served image model's id, or one of OpenAI's names for it (gpt-image-1, "
        "gpt-image-1-mini, dall-e-3, dall-e-2); default: the served image model."
    ),
    "n": s.integer("Pictures to make (picture i with seed + i).", 1, 10),
    "size": s.string(
        "WIDTHxHEIGHT in pixels (multiples of the model's step, within its bounds: GET "
        "/v1/models), or auto."
    ),
    "quality": s.string(
        "auto, standard, medium: the model's default denoising steps; low: half; high, hd: double.",
        QUALITIES,
    ),
    "response_format": s.string(
        "b64_json (the default here) or url: a data: URL.", ("url", "b64_json")
    ),
    "output_format": s.string("png (default), jpeg or webp.", FORMATS),
    "output_compression": s.integer("jpeg / webp quality, 0-100 (default 100).", 0, 100),
    "background": s.limited(
        s.string(enum=("transparent", "opaque", "auto")), _not_transparent, "auto or opaque."
    ),
    "stream": s.boolean("Server-sent events: previews, then each picture."),
    "partial_images": s.integer("Previews of each picture while it denoises (0-3).", 0, 3),
    "user": s.accepted(s.string()),
    "seed": s.integer("Extension: the first picture's seed (picture i: seed + i).", 0, MAX_SEED),
    "num_inference_steps": s.integer("Extension (vLLM-Omni): denoising steps.", 1),
    "guidance_scale": s.number("Extension (vLLM-Omni): classifier-free guidance scale.", 0),
}
GENERATION = RequestSchema(
    {
        **_COMMON,
        "moderation": s.accepted(s.string(enum=("low", "auto"))),
        "style": s.refused("DALL-E 3's vivid / natural look."),
    },
    required=("prompt",),
)
_IMAGE_REF = {
    "type": "object",
    "properties": {
        "image_url": {"type": "string", "description": "An https URL or a data: URL."},
        "file_id": {"type": "string", "description": "Not supported here (no Files API)."},
    },
}
EDIT_JSON = RequestSchema(
    {
        **_COMMON,
        "images": s.structure(
            {"type": "array", "items": _IMAGE_REF, "minItems": 1},
            "The picture to edit, by URL (fetched under the server's media rules) or data: URL: "
            "one.",
        ),
        "mask": s.refused("Masked edits.", _no_mask, _IMAGE_REF),
        "input_fidelity": s.limited(s.string(enum=("high", "low")), _low_fidelity, "low only."),
        "moderation": s.accepted(s.string(enum=("low", "auto"))),
    },
    required=("prompt", "images"),
)
EDIT = RequestSchema(
    {
        **_COMMON,
        "image": s.structure(
            {"type": "string", "contentMediaType": "application/octet-stream"},
            "The picture to edit (PNG, JPEG or WebP): one file.",
        ),
        "mask": s.refused("Masked edits.", _no_mask, {"type": "string"}),
        "input_fidelity": s.limited(s.string(enum=("high", "low")), _low_fidelity, "low only."),
    },
    required=("prompt", "image"),
)


@dataclass(frozen=True)
class ImageCall:
    model: str | None
    prompt: str
    n: int
    size: tuple[int, int] | None  # None: auto
    quality: str
    steps: int | None  # num_inference_steps
    guidance: float | None
    seed: int | None
    response_format: str
    output_format: str
    compression: int
    background: str
    stream: bool
    partial_images: int
    image: bytes | None = None  # an edit's picture
    image_param: str = "image"  # where the request holds it (a JSON edit: its URL)

    def inputs(self, info: ImageInfo) -> ImageInputs:
        """The worker's request, once the model is known: sizes, steps and guidance checked
        against it (a 400 naming `size` / `num_inference_steps` / `guidance_scale` /
        `partial_images`). Previews are asked for only when a stream will carry them."""
        width, height = self._size(info)
        return ImageInputs(
            prompt=self.prompt,
            width=width,
            height=height,
            n=self.n,
            steps=self._steps(info),
            guidance=self._guidance(info),
            seed=self.seed,
            image=self.image,
            partial_images=self._previews(info) if self.stream else 0,
        )

    def _size(self, info: ImageInfo) -> tuple[int, int]:
        if self.size is None:
            if self.image is not None:
                return 0, 0  # the picture's own size (rounded down by the worker)
            side = min(DEFAULT_SIDE, info.max_side)
            return side - side % info.side_multiple, side - side % info.side_multiple
        for side in self.size:
            if not info.min_side <= side <= info.max_side or side % info.side_multiple:
                raise invalid(
                    "size",
                    f"`size` {self.size[0]}x{self.size[1]}: this model makes pictures whose "
                    f"width and height are multiples of {info.side_multiple} from "
                    f"{info.min_side} to {info.max_side} pixels",
                )
        return self.size

    def _steps(self, info: ImageInfo) -> int | None:
        least = 1 if self.image is not None else info.min_steps
        if self.steps is not None:
            if not least <= self.steps <= info.max_steps:
                raise invalid(
                    "num_inference_steps",
                    f"`num_inference_steps` must be {least} to {info.max_steps} for this model",
                )
            return self.steps
        factor = {"low": 0.5, "high": 2.0, "hd": 2.0}.get(self.quality)
        if factor is None:
            return None  # the model's own default
        default = info.default_steps
        if self.image is not None and info.default_edit_steps is not None:
            default = info.default_edit_steps
        return max(least, min(info.max_steps, round(default * factor)))

    def _guidance(self, info: ImageInfo) -> float | None:
        most = info.max_guidance
        if self.guidance is not None and most is not None and self.guidance > most:
            raise invalid(
                "guidance_scale",
                f"`guidance_scale` must be 0 to {most:g} for this model (it is distilled "
                "without classifier-free guidance)",
            )
        return self.guidance

    def _previews(self, info: ImageInfo) -> int:
        if self.partial_images and not info.previews:
            raise unsupported("partial_images", "previews on this model")
        return self.partial_images


def parse_generation(body: dict[str, Any]) -> ImageCall:
    GENERATION.check(body)
    return _call(body, None)


def edit_body(form: Form) -> tuple[dict[str, Any], bytes]:
    """An edit form as (JSON-like body, the picture's bytes); a 400 naming the field."""
    body: dict[str, Any] = {}
    for name, values in form.fields.items():
        if name in IMAGE_FILES:
            raise invalid("image", "`image` must be a file part (the picture), not text")
        if name not in EDIT:
            raise unknown_field(name)
        if len(values) > 1:
            raise invalid(name, f"`{name}` was given {len(values)} times")
        body[name] = form_value(name, values[0], EDIT.fields[name].schema.get("type"))
    pictures = []
    for name, files in form.files.items():
        if name == "mask":
            body["mask"] = "(file)"
            continue
        if name not in IMAGE_FILES:
            raise unknown_field(name)
        pictures.extend(files)
    if not pictures:
        raise invalid("image", "`image` is required: the picture to edit, as a file part")
    if len(pictures) > 1:
        raise invalid(
            "image", f"`image`: {len(pictures)} pictures; the models here edit one at a time"
        )
    body["image"] = "(file)"
    return body, pictures[0].data


def parse_edit(form: Form) -> ImageCall:
    body, picture = edit_body(form)
    EDIT.check(body)
    if not picture:
        raise invalid("image", "`image` is an empty file")
    return _call(body, picture)


def edit_json_url(body: dict[str, Any]) -> str:
    """A JSON edit's picture: the URL of its one `images` entry (checked by EDIT_JSON first)."""
    EDIT_JSON.check(body)
    images = body["images"]
    if not isinstance(images, list) or len(images) != 1:
        count = len(images) if isinstance(images, list) else 0
        raise invalid("images", f"`images`: {count} pictures; the models here edit one at a time")
    ref = images[0]
    if not isinstance(ref, dict) or set(ref) - {"image_url", "file_id"}:
        raise invalid("images[0]", "`images[0]` must be an object with `image_url`")
    if ref.get("file_id") is not None:
        raise unsupported("images[0].file_id", "uploaded files (there is no Files API here)")
    url = ref.get("image_url")
    if not isinstance(url, str) or not url:
        raise invalid("images[0].image_url", "`images[0].image_url` is required: a URL")
    return url


def parse_edit_json(body: dict[str, Any], picture: bytes) -> ImageCall:
    """A JSON edit whose picture was fetched (`edit_json_url` checked the body)."""
    return _call(body, picture, "images[0].image_url")


def _call(body: dict[str, Any], picture: bytes | None, image_param: str = "image") -> ImageCall:
    return ImageCall(
        model=string(body, "model") or None,
        prompt=string(body, "prompt") or "",
        n=integer(body, "n", 1, 10) or 1,
        size=_read_size(string(body, "size")),
        quality=string(body, "quality") or "auto",
        steps=integer(body, "num_inference_steps", 1),
        guidance=number(body, "guidance_scale", 0, None),
        seed=integer(body, "seed", 0, MAX_SEED),
        response_format=string(body, "response_format") or "b64_json",
        output_format=string(body, "output_format") or "png",
        compression=_compression(integer(body, "output_compression", 0, 100)),
        background=string(body, "background") or "auto",
        stream=bool(boolean(body, "stream")),
        partial_images=integer(body, "partial_images", 0, 3) or 0,
        image=picture,
        image_param=image_param,
    )


def _compression(value: int | None) -> int:
    return 100 if value is None else value


def _read_size(text: str | None) -> tuple[int, int] | None:
    if text is None or text == "auto":
        return None
    parts = text.lower().split("x")
    if len(parts) != 2 or not all(p.isascii() and p.isdigit() and len(p) <= 5 for p in parts):
        raise invalid("size", f"`size` must be WIDTHxHEIGHT (e.g. 1024x1024) or auto, got {text!r}")
    return int(parts[0]), int(parts[1])

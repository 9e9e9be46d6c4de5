"""Check an image before the worker sees it: a format Pillow knows, a pixel count under the
cap (read from the header, before any decoding), and a full decode that proves it is intact.

The original bytes travel on unchanged; this only decides whether they may.
"""

from __future__ import annotations

import io

from PIL import Image, UnidentifiedImageError

from gateway.media.problems import INVALID, TOO_LARGE, MediaRejected


def check_image(data: bytes, max_pixels: int, what: str = "the image") -> None:
    """Raise MediaRejected unless `data` is an intact image of at most `max_pixels` pixels.
    CPU-bound for large images: run it in a thread."""
    # Pillow's own guard (DecompressionBombError past twice Image.MAX_IMAGE_PIXELS) stays on
    # as a second line; our cap is checked first, from the header.
    try:
        with Image.open(io.BytesIO(data)) as image:  # reads the header only
            width, height = image.size
            if width * height > max_pixels:
                raise _too_many(what, width, height, max_pixels)
            image.load()  # a full decode: truncated or corrupt data fails here
    except MediaRejected:
        raise
    except Image.DecompressionBombError:
        raise MediaRejected(
            f"{what} is too large to decode safely (a decompression bomb?)", TOO_LARGE
        ) from None
    except UnidentifiedImageError:
        raise MediaRejected(f"{what} is not an image format the server reads", INVALID) from None
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        raise MediaRejected(f"{what} is corrupt or truncated: {exc}", INVALID) from None


def _too_many(what: str, width: int, height: int, max_pixels: int) -> MediaRejected:
    return MediaRejected(
        f"{what} has {width}x{height} = {width * height} pixels, more than the "
        f"{max_pixels}-pixel limit (--max-image-pixels)",
        TOO_LARGE,
    )

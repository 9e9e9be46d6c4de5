"""Media sent inside the request: base64 strings and `data:` URLs, decoded under the byte cap."""

from __future__ import annotations

import base64
import binascii
import re
from urllib.parse import unquote_to_bytes

from gateway.media.problems import INVALID, TOO_LARGE, MediaRejected

_WHITESPACE = re.compile(rb"\s+")


def decode_base64(text: str, max_bytes: int, what: str) -> bytes:
    """Strictly validated base64 (whitespace tolerated), at most `max_bytes` decoded."""
    data = _WHITESPACE.sub(b"", text.encode("ascii", "replace"))
    # 4 base64 characters carry 3 bytes: refuse before decoding something too large.
    if (len(data) // 4) * 3 - 2 > max_bytes:
        raise too_large(what, max_bytes)
    try:
        decoded = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise MediaRejected(f"{what} is not valid base64", INVALID) from None
    if not decoded:
        raise MediaRejected(f"{what} is empty", INVALID)
    if len(decoded) > max_bytes:
        raise too_large(what, max_bytes)
    return decoded


def parse_data_url(url: str, max_bytes: int) -> tuple[str, bytes]:
    """(media type, bytes) of a `data:[<type>][;base64],<data>` URL."""
    header, sep, payload = url.partition(",")
    if not sep:
        raise MediaRejected("the data URL has no ',' before its data", INVALID)
    params = header[len("data:") :].split(";")
    media_type = params[0].strip().lower()
    if "base64" in (p.strip().lower() for p in params[1:]):
        return media_type, decode_base64(payload, max_bytes, "the data URL's data")
    if len(payload) > 3 * max_bytes:  # percent-encoding at most triples the size
        raise too_large("the data URL", max_bytes)
    data = unquote_to_bytes(payload)
    if len(data) > max_bytes:
        raise too_large("the data URL", max_bytes)
    if not data:
        raise MediaRejected("the data URL's data is empty", INVALID)
    return media_type, data


def too_large(what: str, max_bytes: int) -> MediaRejected:
    return MediaRejected(f"{what} is larger than the {max_bytes}-byte media limit", TOO_LARGE)

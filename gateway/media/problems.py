"""The one exception media code raises: why a media item was refused, as a 400 will say it."""

from __future__ import annotations

# Codes clients can branch on (the OpenAI error's `code`).
REFUSED_ADDRESS = "media_address_refused"  # SSRF policy: not a public address, bad scheme
LOCAL_REFUSED = "media_local_path_refused"  # file:// or a path, not allowed or outside the dir
TOO_LARGE = "media_too_large"  # past --media-max-bytes or --max-image-pixels
FETCH_FAILED = "media_fetch_failed"  # network error, timeout, HTTP error status
INVALID = "invalid_media"  # not decodable: bad base64, corrupt image, wrong audio format


class MediaRejected(Exception):
    """A media item that cannot be used; `message` is client-facing, `code` one of the above."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.code = code

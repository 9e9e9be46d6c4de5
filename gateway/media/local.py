"""Local media (`file://` URLs and bare paths): refused unless the server allows a directory.

With `--allowed-local-media-path DIR`, a path is served only when it resolves (symlinks
followed, `..` collapsed) to a regular file inside DIR; a relative path is taken relative to
DIR. Without the flag every local path is refused, so a client cannot read the server's files.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

from gateway.media.problems import LOCAL_REFUSED, TOO_LARGE, MediaRejected


def local_path(reference: str) -> str:
    """The path a `file://` URL or a bare path names (not yet checked)."""
    if reference.lower().startswith("file:"):
        parts = urlsplit(reference)
        if parts.netloc not in ("", "localhost"):
            raise MediaRejected(
                f"refused {reference!r}: file URLs must name a local path", LOCAL_REFUSED
            )
        return unquote(parts.path)
    return reference


def confine(reference: str, allowed_dir: str | None) -> Path:
    """The real path of a local reference inside `allowed_dir`, or MediaRejected."""
    if allowed_dir is None:
        raise MediaRejected(
            f"refused {reference!r}: local files are not served (start the server with "
            "--allowed-local-media-path DIR to allow a directory)",
            LOCAL_REFUSED,
        )
    root = Path(allowed_dir).resolve()
    path = local_path(reference)
    if "\x00" in path:
        raise MediaRejected(f"refused {reference!r}: a NUL byte in the path", LOCAL_REFUSED)
    try:
        # An absolute `path` replaces `root`. Containment is checked before existence, so
        # the answer says nothing about files outside the directory.
        real = (root / path).resolve()
    except (OSError, RuntimeError):  # a symlink loop
        raise MediaRejected(f"refused {reference!r}: unresolvable path", LOCAL_REFUSED) from None
    if not real.is_relative_to(root):
        raise MediaRejected(
            f"refused {reference!r}: it is outside the allowed media directory", LOCAL_REFUSED
        )
    if not real.exists():
        raise MediaRejected(f"no such local file: {reference!r}", LOCAL_REFUSED)
    if not real.is_file():
        raise MediaRejected(f"refused {reference!r}: not a regular file", LOCAL_REFUSED)
    return real


def read_local(reference: str, allowed_dir: str | None, max_bytes: int) -> bytes:
    """The bytes of a confined local file, at most `max_bytes` (blocking: run it in a thread)."""
    real = confine(reference, allowed_dir)
    try:
        with open(real, "rb") as file:
            if os.fstat(file.fileno()).st_size > max_bytes:
                raise _too_large(reference, max_bytes)
            data = file.read(max_bytes + 1)  # the file may grow after the fstat
    except OSError as exc:
        raise MediaRejected(f"cannot read {reference!r}: {exc.strerror}", LOCAL_REFUSED) from None
    if len(data) > max_bytes:
        raise _too_large(reference, max_bytes)
    return data


def _too_large(reference: str, max_bytes: int) -> MediaRejected:
    return MediaRejected(
        f"{reference!r} is larger than the {max_bytes}-byte media limit", TOO_LARGE
    )

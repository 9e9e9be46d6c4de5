"""Local media paths: refused by default; with an allowed directory, confined to it."""

from __future__ import annotations

import os

import pytest

from gateway.media import problems
from gateway.media.local import read_local
from gateway.media.problems import MediaRejected

CAP = 1 << 20


@pytest.fixture
def layout(tmp_path):
    allowed = tmp_path / "media"
    allowed.mkdir()
    (allowed / "cat.png").write_bytes(b"cat")
    (allowed / "sub").mkdir()
    (allowed / "sub" / "dog.png").write_bytes(b"dog")
    (tmp_path / "secret.txt").write_bytes(b"secret")
    os.symlink(tmp_path / "secret.txt", allowed / "escape.png")
    os.symlink(allowed / "sub" / "dog.png", allowed / "inner.png")
    return allowed


def rejected(reference: str, allowed: str | None, max_bytes: int = CAP) -> MediaRejected:
    with pytest.raises(MediaRejected) as info:
        read_local(reference, allowed, max_bytes)
    return info.value


def test_local_paths_are_refused_without_an_allowed_directory(layout):
    for reference in (str(layout / "cat.png"), f"file://{layout}/cat.png", "cat.png"):
        error = rejected(reference, None)
        assert error.code == problems.LOCAL_REFUSED
        assert "--allowed-local-media-path" in error.message


@pytest.mark.parametrize(
    "reference, expected",
    [
        ("cat.png", b"cat"),  # relative to the allowed directory
        ("sub/dog.png", b"dog"),
        ("sub/../cat.png", b"cat"),  # `..` that stays inside is fine
        ("inner.png", b"dog"),  # a symlink to a file inside
    ],
)
def test_paths_inside_the_allowed_directory_are_read(layout, reference, expected):
    assert read_local(reference, str(layout), CAP) == expected
    assert read_local(str(layout / reference), str(layout), CAP) == expected
    assert read_local(f"file://{layout}/{reference}", str(layout), CAP) == expected


@pytest.mark.parametrize(
    "reference",
    ["../secret.txt", "sub/../../secret.txt", "escape.png", "/etc/passwd", "file:///etc/passwd"],
)
def test_escapes_from_the_allowed_directory_are_refused(layout, reference):
    error = rejected(reference, str(layout))
    assert error.code == problems.LOCAL_REFUSED
    assert "outside the allowed media directory" in error.message


def test_a_missing_file_outside_is_refused_as_outside_not_as_missing(layout):
    assert "outside" in rejected("/nonexistent/x.png", str(layout)).message
    assert "no such local file" in rejected("missing.png", str(layout)).message


def test_directories_and_remote_file_hosts_are_refused(layout):
    assert "not a regular file" in rejected("sub", str(layout)).message
    assert "local path" in rejected("file://otherhost/cat.png", str(layout)).message


def test_a_file_over_the_byte_cap_is_refused(layout):
    assert rejected("cat.png", str(layout), max_bytes=2).code == problems.TOO_LARGE

"""Checks of media bytes: images (format, pixel cap before decoding, corruption), base64 and
data URLs under the byte cap, audio formats."""

from __future__ import annotations

import base64
import io
import struct

import pytest
from PIL import Image

from gateway.media import problems
from gateway.media.audio import check_audio
from gateway.media.images import check_image
from gateway.media.inline import decode_base64, parse_data_url
from gateway.media.problems import MediaRejected
from gateway.media.video import check_video, sniff_video_container
from tests.support.vision import png_header_only


def png(width: int = 8, height: int = 6) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 40)).save(buffer, "PNG")
    return buffer.getvalue()


def rejected(call, *args) -> MediaRejected:
    with pytest.raises(MediaRejected) as info:
        call(*args)
    return info.value


def test_an_intact_image_under_the_cap_passes():
    check_image(png(), 100)
    buffer = io.BytesIO()
    Image.new("L", (4, 4)).save(buffer, "JPEG")
    check_image(buffer.getvalue(), 100)


def test_an_image_over_the_pixel_cap_is_refused_naming_its_size():
    error = rejected(check_image, png(8, 6), 47)
    assert error.code == problems.TOO_LARGE
    assert "8x6 = 48 pixels" in error.message


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")
def test_a_huge_declared_size_is_refused_from_the_header_without_decoding():
    # 10000 x 10000 = 100M pixels (300 MB decoded) in a file of a few dozen bytes.
    error = rejected(check_image, png_header_only(10_000, 10_000), 40_000_000)
    assert error.code == problems.TOO_LARGE
    assert "10000x10000" in error.message


def test_pillows_bomb_guard_is_a_clean_refusal_too():
    # Our cap set above Pillow's hard limit: Pillow refuses at open, still a MediaRejected.
    error = rejected(check_image, png_header_only(30_000, 30_000), 10**12)
    assert error.code == problems.TOO_LARGE
    assert "decompression bomb" in error.message


def test_a_truncated_image_is_corrupt():
    data = png(64, 64)
    error = rejected(check_image, data[: len(data) // 2], 10**6)
    assert error.code == problems.INVALID
    assert "corrupt or truncated" in error.message


def test_bytes_that_are_no_image_are_refused():
    error = rejected(check_image, b"%PDF-1.7 not an image", 10**6)
    assert error.code == problems.INVALID
    assert "not an image" in error.message


def test_base64_is_validated_strictly():
    assert decode_base64(base64.b64encode(b"abc").decode(), 10, "x") == b"abc"
    assert decode_base64("YW\nJj", 10, "x") == b"abc"  # line breaks are fine
    assert rejected(decode_base64, "not*base64!", 100, "x").code == problems.INVALID
    assert rejected(decode_base64, "", 100, "x").code == problems.INVALID


def test_base64_over_the_byte_cap_is_refused():
    encoded = base64.b64encode(b"z" * 100).decode()
    assert decode_base64(encoded, 100, "x") == b"z" * 100
    error = rejected(decode_base64, encoded, 99, "the image")
    assert error.code == problems.TOO_LARGE
    assert "99-byte" in error.message


def test_data_urls_are_decoded():
    data = png()
    url = "data:image/png;base64," + base64.b64encode(data).decode()
    assert parse_data_url(url, 1 << 20) == ("image/png", data)
    assert parse_data_url("data:text/plain,a%20b", 100) == ("text/plain", b"a b")


def test_malformed_data_urls_are_refused():
    assert rejected(parse_data_url, "data:image/png;base64", 100).code == problems.INVALID
    assert rejected(parse_data_url, "data:image/png;base64,@@@", 100).code == problems.INVALID
    big = "data:image/png;base64," + base64.b64encode(b"q" * 200).decode()
    assert rejected(parse_data_url, big, 100).code == problems.TOO_LARGE


def wav() -> bytes:
    return b"RIFF" + struct.pack("<I", 36) + b"WAVEfmt " + b"\x00" * 24


def test_audio_must_match_its_declared_format():
    check_audio(wav(), "wav")
    check_audio(b"ID3\x04\x00" + b"\x00" * 20, "mp3")
    check_audio(b"\xff\xfb\x90\x00" + b"\x00" * 20, "mp3")
    assert "not wav data" in rejected(check_audio, b"ID3\x04", "wav").message
    assert "not mp3 data" in rejected(check_audio, wav(), "mp3").message
    assert rejected(check_audio, wav(), "flac").code == problems.INVALID


@pytest.mark.parametrize(
    ("head", "container"),
    [
        (bytes(4) + b"ftypisom", "mp4"),
        (bytes(4) + b"ftypqt  ", "mov"),
        (b"\x1a\x45\xdf\xa3" + bytes(20) + b"webm", "webm"),
        (b"\x1a\x45\xdf\xa3" + bytes(20) + b"matroska", "mkv"),
        (b"RIFF" + bytes(4) + b"AVI LIST", "avi"),
        (b"\x89PNG\r\n\x1a\n" + bytes(8), None),
        (b"RIFF" + bytes(4) + b"WAVEfmt ", None),
        (b"", None),
    ],
)
def test_video_containers_are_told_by_their_first_bytes(head, container):
    assert sniff_video_container(head + bytes(64)) == container
    if container is None:
        with pytest.raises(MediaRejected, match="not a video file"):
            check_video(head)

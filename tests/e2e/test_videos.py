"""`/v1/videos` through the real server (gateway + worker processes), by the openai SDK, on the
tiny MiniMax-H3 checkpoint (mlx-vlm's converted layout) served next to a chat model.

The job's MP4 is byte for byte what direct mlx-vlm writes (`generate_video`, then
`VideoGenerationResult.save`, same seed, steps, size and length) and its thumbnail is the
first frame exactly; the job objects match OpenAI's document (but for `size`, whose enum there
lists only Sora's four); progress rises while it runs; /metrics counts the denoising steps; the list pages; deleting a running job
aborts it between steps and the worker serves on; bad requests are 4xx naming the field; a
worker killed mid-clip fails its job and comes back; the model is served alone (as MODEL) and
in a models file (`kind: video`, its own worker) too.
"""

from __future__ import annotations

import io
import os
import signal
import time

import httpx
import numpy as np
import pytest
from PIL import Image

from tests.support.openai_spec import errors as spec_errors
from tests.support.server import SAME_BLAS, model_name, openai_client
from tests.support.video_direct import direct_clip, needs_ffmpeg
from worker.tiny_models import ensure_checkpoint

PROMPT = "a red fox running in the snow"
# The SDK warns that OpenAI's own Sora API has shut down; its shape is what is served here.
pytestmark = [pytest.mark.filterwarnings("ignore:The Sora API:DeprecationWarning"), needs_ffmpeg]


@pytest.fixture(scope="module")
def h3_path() -> str:
    return str(ensure_checkpoint("minimax_h3", "tiny"))


@pytest.fixture(scope="module")
def server(start_server, qwen3_path, h3_path):
    """A chat model with the tiny MiniMax-H3 next to it (--video-model)."""
    return start_server(qwen3_path, *SAME_BLAS, "--video-model", h3_path, name="qwen3+h3")


def conforms(video: dict) -> None:
    """The job object is OpenAI's VideoResource; its `size` is the model's, not Sora's enum."""
    problems = spec_errors("VideoResource", video)
    assert all(p.startswith("$.size:") for p in problems), problems


def http(server) -> httpx.Client:
    return httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {server.api_key}"}, timeout=60
    )


def wait(client: httpx.Client, video_id: str, timeout: float = 120) -> dict:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        video = client.get(f"/v1/videos/{video_id}").json()
        if video["status"] in ("completed", "failed"):
            return video
        time.sleep(0.1)
    raise AssertionError(f"video {video_id} did not finish in {timeout} s")


def test_the_sdk_makes_a_clip_byte_for_byte_what_mlx_vlm_writes(server, h3_path):
    client = openai_client(server)
    video = client.videos.create_and_poll(
        prompt=PROMPT,
        seconds="5",
        size="64x32",
        extra_body={"seed": 7, "num_inference_steps": 4},
        poll_interval_ms=100,
    )
    assert video.status == "completed", video.error
    assert (video.size, video.seconds, video.progress) == ("64x32", "5", 100)
    assert video.model == model_name(h3_path) and video.prompt == PROMPT
    conforms(video.model_dump(mode="json"))
    direct = direct_clip(h3_path, PROMPT, 7, 4, 64, 32, 5)
    assert client.videos.download_content(video.id).read() == direct.mp4
    thumbnail = client.videos.download_content(video.id, variant="thumbnail")
    first = np.array(Image.open(io.BytesIO(thumbnail.read())).convert("RGB"))
    assert np.array_equal(first, direct.frames[0])
    assert video.expires_at == video.completed_at + 3600
    metrics = httpx.get(f"{server.url}/metrics", headers=server.headers, timeout=30).text
    steps = [line for line in metrics.splitlines() if line.startswith("vomlx:video_denoising")]
    counted = {line.split("{")[0]: float(line.rsplit(" ", 1)[1]) for line in steps}
    assert counted["vomlx:video_denoising_steps_total"] >= 3, steps  # (4 steps: 3 denoising)
    assert counted["vomlx:video_denoising_seconds_total"] > 0, steps


def test_progress_rises_the_list_pages_and_a_deleted_job_is_aborted(server, qwen3_path):
    with http(server) as client:
        form = {"prompt": PROMPT, "size": "32x32", "seed": "1", "num_inference_steps": "3"}
        parts = {name: (None, value) for name, value in form.items()}  # multipart text parts
        made = [client.post("/v1/videos", files=parts).json() for _ in range(2)]
        assert all(v["status"] == "queued" and v["progress"] == 0 for v in made), made
        long = client.post(
            "/v1/videos", json={"prompt": PROMPT, "size": "32x32", "num_inference_steps": 100}
        ).json()
        conforms(long)
        seen = []
        end = time.monotonic() + 120
        while time.monotonic() < end and (not seen or seen[-1] < 10):
            seen.append(client.get(f"/v1/videos/{long['id']}").json()["progress"])
            time.sleep(0.05)
        assert seen[-1] >= 10 and seen == sorted(seen), seen
        assert all(wait(client, v["id"])["status"] == "completed" for v in made)

        page = client.get("/v1/videos", params={"limit": 2}).json()
        assert page["object"] == "list" and page["has_more"] is True
        assert [v["id"] for v in page["data"]] == [long["id"], made[1]["id"]]
        rest = client.get("/v1/videos", params={"after": made[1]["id"], "limit": 100}).json()
        assert made[0]["id"] in [v["id"] for v in rest["data"]]
        oldest_first = client.get("/v1/videos", params={"order": "asc"}).json()["data"]
        assert [v["id"] for v in oldest_first][-3:] == [made[0]["id"], made[1]["id"], long["id"]]

        deleted = client.delete(f"/v1/videos/{long['id']}").json()
        assert deleted == {"id": long["id"], "object": "video.deleted", "deleted": True}
        assert client.get(f"/v1/videos/{long['id']}").status_code == 404
        # The worker stopped it between two steps: the next job runs at once.
        again = client.post(
            "/v1/videos", json={"prompt": PROMPT, "size": "32x32", "num_inference_steps": 2}
        ).json()
        assert wait(client, again["id"], timeout=30)["status"] == "completed"
        chat = client.post(
            "/v1/chat/completions",
            json={"model": model_name(qwen3_path), "max_tokens": 3,
                  "messages": [{"role": "user", "content": "Hi"}]},
        )  # fmt: skip
        assert chat.status_code == 200, chat.text  # the worker serves on


@pytest.mark.parametrize(
    "body, param",
    [
        ({"prompt": PROMPT, "seconds": "4"}, "seconds"),  # under the model's 5 s
        ({"prompt": PROMPT, "seconds": "20"}, "seconds"),
        ({"prompt": PROMPT, "seconds": "15"}, "seconds"),  # 362 frames: 15.08 s
        ({"prompt": PROMPT, "seconds": "five"}, "seconds"),
        ({"prompt": PROMPT, "size": "48x32"}, "size"),
        ({"prompt": PROMPT, "size": "160x32"}, "size"),
        ({"prompt": PROMPT, "size": "wide"}, "size"),
        ({"prompt": PROMPT, "num_inference_steps": 1}, "num_inference_steps"),
        ({"prompt": PROMPT, "input_reference": {"image_url": "https://x/a.png"}},
         "input_reference"),
        ({"prompt": ""}, "prompt"),
        ({"prompt": PROMPT, "model": "tts-1"}, "model"),
        ({"prompt": PROMPT, "frames": 9}, "frames"),
    ],
)  # fmt: skip
def test_bad_requests_are_400_naming_the_field(server, body, param):
    with http(server) as client:
        response = client.post("/v1/videos", json=body)
        assert response.status_code in (400, 404), response.text
        assert response.json()["error"]["param"] == param, response.text


def test_a_reference_file_unknown_ids_and_unready_content_are_refused(server):
    with http(server) as client:
        response = client.post(
            "/v1/videos", data={"prompt": PROMPT}, files={"input_reference": b"\x89PNG"}
        )
        assert response.status_code == 400
        assert response.json()["error"]["param"] == "input_reference"
        as_file = client.post("/v1/videos", files={"prompt": ("p.txt", b"a fox")})
        assert as_file.status_code == 400 and as_file.json()["error"]["param"] == "prompt"
        for path in ("/v1/videos/video_nope", "/v1/videos/video_nope/content"):
            missing = client.get(path)
            assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
        running = client.post(
            "/v1/videos", json={"prompt": PROMPT, "size": "32x32", "num_inference_steps": 100}
        ).json()
        early = client.get(f"/v1/videos/{running['id']}/content")
        assert early.status_code == 400 and early.json()["error"]["code"] == "video_not_ready"
        sheet = client.get(f"/v1/videos/{running['id']}/content", params={"variant": "sprite"})
        assert sheet.status_code == 400 and sheet.json()["error"]["param"] == "variant"
        assert client.get("/v1/videos", params={"limit": 101}).status_code == 400
        assert client.delete(f"/v1/videos/{running['id']}").status_code == 200


def test_jobs_wait_in_the_gateway_two_at_a_time_at_the_worker_and_chat_goes_on(server, qwen3_path):
    with http(server) as client:
        body = {"prompt": PROMPT, "size": "32x32", "num_inference_steps": 100}
        jobs = [client.post("/v1/videos", json=body).json()["id"] for _ in range(5)]
        end = time.monotonic() + 60
        while client.get(f"/v1/videos/{jobs[0]}").json()["status"] != "in_progress":
            assert time.monotonic() < end, "the first job did not start"
            time.sleep(0.05)
        counters = server.stats()
        assert counters["active"] + counters["waiting"] <= 2, counters
        statuses = [client.get(f"/v1/videos/{j}").json()["status"] for j in jobs]
        assert statuses[2:] == ["queued"] * 3, statuses
        chat = client.post(
            "/v1/chat/completions",
            json={"model": model_name(qwen3_path), "max_tokens": 3,
                  "messages": [{"role": "user", "content": "Hi"}]},
        )  # fmt: skip
        assert chat.status_code == 200, chat.text
        for job in jobs:
            assert client.delete(f"/v1/videos/{job}").status_code == 200


def test_a_worker_killed_mid_clip_fails_its_job_and_the_next_job_is_served(server):
    with http(server) as client:
        running = client.post(
            "/v1/videos", json={"prompt": PROMPT, "size": "32x32", "num_inference_steps": 100}
        ).json()
        end = time.monotonic() + 60
        while client.get(f"/v1/videos/{running['id']}").json()["status"] != "in_progress":
            assert time.monotonic() < end, "the job did not start"
            time.sleep(0.05)
        pid = server.worker_pid()
        os.kill(pid, signal.SIGKILL)
        failed = wait(client, running["id"], timeout=60)
        assert failed["status"] == "failed" and failed["error"]["code"] == "worker_died", failed
        while not ((h := server.health()).status_code == 200 and h.json()["worker_pid"] != pid):
            assert time.monotonic() < end + 120, "the worker did not come back"
            time.sleep(0.2)
        again = client.post(
            "/v1/videos", json={"prompt": PROMPT, "size": "32x32", "num_inference_steps": 2}
        ).json()
        assert wait(client, again["id"], timeout=60)["status"] == "completed"


def test_a_video_model_served_alone_is_listed_and_makes_clips(start_server, h3_path):
    alone = start_server(h3_path, *SAME_BLAS, name="h3")
    with http(alone) as client:
        cards = client.get("/v1/models").json()["data"]
        assert [(c["id"], c["task"], c["capabilities"]) for c in cards] == [
            (model_name(h3_path), "video", ["video_out"])
        ]
        made = client.post(
            "/v1/videos",
            json={"model": "sora-2", "prompt": PROMPT, "size": "32x64", "seconds": "8",
                  "num_inference_steps": 2, "seed": 3},
        ).json()  # fmt: skip
        video = wait(client, made["id"])
        assert (video["status"], video["model"], video["size"]) == (
            "completed", model_name(h3_path), "32x64",
        )  # fmt: skip
        assert client.get(f"/v1/videos/{made['id']}/content").content == (
            direct_clip(h3_path, PROMPT, 3, 2, 32, 64, 8).mp4
        )
        hello = [{"role": "user", "content": "Hi"}]
        chat = client.post(
            "/v1/chat/completions", json={"messages": hello, "model": model_name(h3_path)}
        )
        assert chat.status_code == 400 and chat.json()["error"]["param"] == "model", chat.text
    alone.stop()


def test_a_models_file_serves_a_video_model_in_its_own_worker(
    start_server, tmp_path_factory, qwen3_path, h3_path
):
    text = f"""\
models:
  - id: chat
    path: {qwen3_path}
  - id: director
    path: {h3_path}
    kind: video
    options: {{blas: bundled}}
"""
    models_file = tmp_path_factory.mktemp("models") / "pool.yaml"
    models_file.write_text(text)
    pool = start_server("--models", str(models_file), name="pool+video")
    client = openai_client(pool)
    video = client.videos.create_and_poll(
        model="director", prompt=PROMPT, size="32x32",
        extra_body={"seed": 5, "num_inference_steps": 2}, poll_interval_ms=100,
    )  # fmt: skip
    assert video.status == "completed" and video.model == "director", video.error
    assert client.videos.download_content(video.id).read() == (
        direct_clip(h3_path, PROMPT, 5, 2, 32, 32, 5).mp4
    )
    chat = client.chat.completions.create(
        model="chat", messages=[{"role": "user", "content": "Hi"}], max_tokens=3
    )
    assert chat.choices[0].message.content is not None
    cards = {m.id: m.model_dump() for m in client.models.list().data}
    assert cards["director"]["task"] == "video" and cards["chat"]["task"] == "chat"
    pool.stop()

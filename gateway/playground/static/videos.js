// The videos panel: a prompt, a size, a length, steps and a seed go to POST /v1/videos; the
// job is polled (GET /v1/videos/{id}) for its progress, and once completed its MP4 (GET
// /v1/videos/{id}/content) plays in a <video> element from a blob: URL, with a download
// link. Stop deletes the job, which aborts it between two denoising steps.

import { apiFetch, errorOf, getJson, postJson } from "./api.js";

const $ = (id) => document.getElementById(id);
const POLL_MS = 250;
let job = null; // the id of the job in progress
let clipUrl = null; // the blob: URL of the last clip, revoked when replaced

export function initVideos(models) {
  const select = $("videos-model");
  for (const model of models) select.add(new Option(model.id, model.id));
  $("videos-form").addEventListener("submit", (event) => {
    event.preventDefault();
    generate();
  });
  $("videos-stop").addEventListener("click", stop);
}

function status(text, kind = "") {
  const line = $("videos-status");
  line.textContent = text;
  line.dataset.kind = kind;
}

function number(id) {
  const value = $(id).valueAsNumber;
  return Number.isFinite(value) ? value : undefined;
}

// The request: empty fields are not sent, so the model's defaults apply (its canvas, its
// shortest clip, its number of steps, a random seed).
function requestBody() {
  const body = { model: $("videos-model").value, prompt: $("videos-prompt").value };
  const size = $("videos-size").value.trim();
  if (size) body.size = size;
  const seconds = number("videos-seconds");
  if (seconds !== undefined) body.seconds = String(seconds);
  const steps = number("videos-steps");
  if (steps !== undefined) body.num_inference_steps = steps;
  const seed = number("videos-seed");
  if (seed !== undefined) body.seed = seed;
  return body;
}

function setBusy(busy) {
  $("videos-go").hidden = busy;
  $("videos-stop").hidden = !busy;
  $("videos-progress").hidden = !busy;
}

async function stop() {
  const id = job;
  job = null;
  if (id) await apiFetch(`v1/videos/${id}`, { method: "DELETE" });
  $("videos-clip").dataset.state = "stopped";
  status("Stopped.", "error");
  setBusy(false);
}

async function showClip(video) {
  const response = await apiFetch(`v1/videos/${video.id}/content`);
  if (!response.ok) throw await errorOf(response);
  const blob = await response.blob();
  if (clipUrl) URL.revokeObjectURL(clipUrl);
  clipUrl = URL.createObjectURL(new Blob([blob], { type: "video/mp4" }));
  const clip = $("videos-clip");
  clip.src = clipUrl;
  clip.dataset.state = "final";
  clip.dataset.videoId = video.id;
  const download = $("videos-download");
  download.href = clipUrl;
  download.download = `${video.id}.mp4`;
  download.hidden = false;
  $("videos-result").hidden = false;
}

async function generate() {
  if (job) return;
  const body = requestBody();
  if (!body.prompt.trim()) {
    status("Describe the clip first.", "error");
    return;
  }
  const clip = $("videos-clip");
  clip.removeAttribute("src");
  clip.dataset.state = "waiting";
  $("videos-result").hidden = true;
  $("videos-download").hidden = true;
  $("videos-progress").value = 0;
  setBusy(true);
  status("Queued…");
  const started = performance.now();
  try {
    let video = await (await postJson("v1/videos", body)).json();
    job = video.id;
    while (job === video.id && video.status !== "completed" && video.status !== "failed") {
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      if (job !== video.id) return; // stopped
      video = await getJson(`v1/videos/${video.id}`);
      $("videos-progress").value = video.progress;
      if (video.status === "in_progress") status(`Generating… ${video.progress} %`);
    }
    if (job !== video.id) return;
    if (video.status === "failed") throw new Error(video.error?.message || "The job failed.");
    await showClip(video);
    const seconds = ((performance.now() - started) / 1000).toFixed(2);
    status(`${video.size}, ${video.seconds} s of video in ${seconds} s`, "ok");
  } catch (error) {
    clip.dataset.state = "error";
    status(error.message, "error");
  } finally {
    job = null;
    setBusy(false);
  }
}

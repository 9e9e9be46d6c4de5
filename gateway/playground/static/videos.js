// The videos panel: a prompt, a size, a length, steps and a seed go to POST /v1/videos; the
// job is polled (GET /v1/videos/{id}) for its progress, and once completed its MP4 (GET
// /v1/videos/{id}/content) plays in a <video> element from a blob: URL, with a download
// link. Stop deletes the job, which aborts it between two denoising steps; a job whose POST
// was still on its way when Stop was pressed is deleted as soon as its id comes back.
//
// Each Generate is a run: { token, job, stopped }, `token` the number of runs started so far.
// Only the run in progress (`active`), not stopped, changes the panel: a stopped run ends
// quietly (deleting its job if Stop could not yet) and leaves the panel to stop() and to the
// runs after it.

import { apiFetch, errorOf, getJson, postJson } from "./api.js";

const $ = (id) => document.getElementById(id);
const POLL_MS = 250;
const PIXELATED_BELOW = 256; // clips narrower than this are scaled up with sharp pixels
let runs = 0; // the runs started so far: the last one's token
let active = null; // the run in progress, whose Stop button shows
let clipUrl = null; // the blob: URL of the last clip, revoked when replaced

export function initVideos(models) {
  const select = $("videos-model");
  for (const model of models) select.add(new Option(model.id, model.id));
  $("videos-form").addEventListener("submit", (event) => {
    event.preventDefault();
    generate();
  });
  $("videos-stop").addEventListener("click", stop);
  const clip = $("videos-clip");
  clip.addEventListener("loadedmetadata", () => {
    clip.classList.toggle("pixelated", clip.videoWidth > 0 && clip.videoWidth < PIXELATED_BELOW);
  });
  // A looping clip stops playing while another tab is shown.
  document.addEventListener("playground:tab", (event) => {
    if (event.detail !== "videos") clip.pause();
  });
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

// Hides the clip: it stops playing and lets go of its blob (pause, no src, load).
function hideClip() {
  const clip = $("videos-clip");
  clip.pause();
  clip.removeAttribute("src");
  clip.load();
  clip.classList.remove("pixelated");
  delete clip.dataset.videoId;
  $("videos-result").hidden = true;
  $("videos-download").hidden = true;
  if (clipUrl) URL.revokeObjectURL(clipUrl);
  clipUrl = null;
}

// DELETE /v1/videos/{id}; a job already gone (404) counts as deleted.
async function deleteJob(id) {
  const response = await apiFetch(`v1/videos/${id}`, { method: "DELETE" });
  if (!response.ok && response.status !== 404) throw await errorOf(response);
}

// Best effort: a job the tab gives up on is deleted, and a failure to is only logged.
async function discard(id) {
  try {
    await deleteJob(id);
  } catch (error) {
    console.warn(`Could not delete the video job ${id}: ${error.message}`);
  }
}

// Stop: the run in progress is marked stopped at once, so it changes the panel no more; its
// job is deleted here when its id is known, else by the run when its POST answers.
async function stop() {
  const run = active;
  if (!run || run.stopped) return;
  run.stopped = true;
  const clip = $("videos-clip");
  try {
    if (run.job) {
      $("videos-stop").disabled = true;
      status("Stopping…");
      await deleteJob(run.job);
    }
    clip.dataset.state = "stopped";
    status("Stopped.", "error");
  } catch (error) {
    clip.dataset.state = "error";
    status(`Stop failed: ${error.message}`, "error");
  } finally {
    $("videos-stop").disabled = false;
    active = null;
    setBusy(false);
  }
}

async function fetchClip(video) {
  const response = await apiFetch(`v1/videos/${video.id}/content`);
  if (!response.ok) throw await errorOf(response);
  return response.blob();
}

function showClip(video, blob) {
  hideClip();
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
  if (active) return;
  const body = requestBody();
  if (!body.prompt.trim()) {
    status("Describe the clip first.", "error");
    return;
  }
  const run = { token: ++runs, job: null, stopped: false };
  const current = () => active === run && !run.stopped; // the panel is this run's
  active = run;
  hideClip();
  $("videos-clip").dataset.state = "waiting";
  $("videos-progress").value = 0;
  setBusy(true);
  status("Queued…");
  const started = performance.now();
  try {
    let video = await (await postJson("v1/videos", body)).json();
    run.job = video.id;
    if (run.stopped) {
      // Stop was pressed while the POST was on its way: the job it made goes now.
      try {
        await deleteJob(video.id);
      } catch (error) {
        if (run.token !== runs) return; // a newer run has the panel
        $("videos-clip").dataset.state = "error";
        status(`Stop failed: ${error.message}`, "error");
      }
      return;
    }
    while (video.status !== "completed" && video.status !== "failed") {
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      if (!current()) return; // stopped: stop() deletes the job
      try {
        video = await getJson(`v1/videos/${video.id}`);
      } catch (error) {
        if (!current()) return;
        await discard(run.job); // polling ends here, so the job must not run on
        throw error;
      }
      if (!current()) return;
      $("videos-progress").value = video.progress;
      if (video.status === "in_progress") status(`Generating… ${video.progress} %`);
    }
    if (video.status === "failed") throw new Error(video.error?.message || "The job failed.");
    const blob = await fetchClip(video);
    if (!current()) return;
    showClip(video, blob);
    const seconds = ((performance.now() - started) / 1000).toFixed(2);
    status(`${video.size}, ${video.seconds} s of video in ${seconds} s`, "ok");
  } catch (error) {
    if (!current()) return;
    $("videos-clip").dataset.state = "error";
    status(error.message, "error");
  } finally {
    if (current()) {
      active = null;
      setBusy(false);
    }
  }
}

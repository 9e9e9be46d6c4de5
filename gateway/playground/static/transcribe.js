// The transcription panel: an uploaded file, or a microphone recording (MediaRecorder), goes
// to POST /v1/audio/transcriptions (or /translations) and its text is shown. A recording is
// decoded in the page and sent as 16-bit mono WAV, which the server reads without ffmpeg.

import { apiFetch, errorOf } from "./api.js";

const $ = (id) => document.getElementById(id);
const RECORD_SAMPLE_RATE = 16000; // what Whisper listens at; the worker resamples anything else
let recorder = null; // the MediaRecorder while recording
let previewUrl = null;

export function initTranscribe(models) {
  const select = $("transcribe-model");
  for (const model of models) select.add(new Option(model.id, model.id));
  select.addEventListener("change", () => updateTranslate(models));
  updateTranslate(models);
  $("transcribe-form").addEventListener("submit", (event) => event.preventDefault());
  $("transcribe-file").addEventListener("change", (event) => {
    const file = event.target.files[0];
    if (file) transcribe(file, file.name);
    event.target.value = "";
  });
  const record = $("transcribe-record");
  if (!navigator.mediaDevices?.getUserMedia || typeof MediaRecorder === "undefined") {
    record.disabled = true;
    record.title = "This browser cannot record here (recording needs https or localhost).";
  }
  record.addEventListener("click", () => (recorder ? stopRecording() : startRecording()));
}

function updateTranslate(models) {
  const model = models.find((m) => m.id === $("transcribe-model").value);
  const translates = (model?.capabilities || []).includes("translate");
  $("transcribe-translate-label").hidden = !translates;
  if (!translates) $("transcribe-translate").checked = false;
}

function status(text, kind = "") {
  const line = $("transcribe-status");
  line.textContent = text;
  line.dataset.kind = kind;
}

function preview(blob) {
  if (previewUrl) URL.revokeObjectURL(previewUrl);
  previewUrl = URL.createObjectURL(blob);
  const audio = $("transcribe-audio");
  audio.src = previewUrl;
  audio.hidden = false;
}

async function transcribe(blob, name) {
  preview(blob);
  const form = new FormData();
  form.append("file", blob, name);
  form.append("model", $("transcribe-model").value);
  form.append("response_format", "json");
  const language = $("transcribe-language").value.trim();
  if (language) form.append("language", language);
  const translate = $("transcribe-translate").checked;
  const path = translate ? "v1/audio/translations" : "v1/audio/transcriptions";
  status(`Transcribing ${name}…`);
  $("transcribe-result").hidden = true;
  const started = performance.now();
  try {
    const response = await apiFetch(path, { method: "POST", body: form });
    if (!response.ok) throw await errorOf(response);
    const { text } = await response.json();
    $("transcript").textContent = text;
    $("transcribe-result").hidden = false;
    const seconds = ((performance.now() - started) / 1000).toFixed(2);
    status(`${name}: ${translate ? "translated" : "transcribed"} in ${seconds} s`, "ok");
  } catch (error) {
    status(error.message, "error");
  }
}

// -- the microphone -------------------------------------------------------------------------

async function startRecording() {
  let stream;
  try {
    stream = await navigator.mediaDevices.getUserMedia({ audio: true });
  } catch (error) {
    status(`No microphone: ${error.message}`, "error");
    return;
  }
  const chunks = [];
  recorder = new MediaRecorder(stream);
  recorder.addEventListener("dataavailable", (event) => chunks.push(event.data));
  recorder.addEventListener("stop", async () => {
    for (const track of stream.getTracks()) track.stop();
    recorder = null;
    $("transcribe-record").textContent = "● Record";
    $("transcribe-record").classList.remove("recording");
    try {
      const recorded = new Blob(chunks, { type: chunks[0]?.type || "audio/webm" });
      transcribe(await toWav(recorded), "recording.wav");
    } catch (error) {
      status(`Could not decode the recording: ${error.message}`, "error");
    }
  });
  recorder.start();
  $("transcribe-record").textContent = "■ Stop";
  $("transcribe-record").classList.add("recording");
  status("Recording… press Stop when done.");
}

function stopRecording() {
  recorder?.stop();
}

// Any audio the browser decodes -> a 16-bit mono WAV at RECORD_SAMPLE_RATE.
async function toWav(blob) {
  const context = new OfflineAudioContext(1, 1, RECORD_SAMPLE_RATE);
  const decoded = await context.decodeAudioData(await blob.arrayBuffer());
  const frames = Math.max(1, Math.ceil(decoded.duration * RECORD_SAMPLE_RATE));
  const render = new OfflineAudioContext(1, frames, RECORD_SAMPLE_RATE);
  const source = render.createBufferSource();
  source.buffer = decoded; // rendering mixes it down to one channel and resamples
  source.connect(render.destination);
  source.start();
  const samples = (await render.startRendering()).getChannelData(0);
  return new Blob([wavBytes(samples, RECORD_SAMPLE_RATE)], { type: "audio/wav" });
}

function wavBytes(samples, rate) {
  const view = new DataView(new ArrayBuffer(44 + samples.length * 2));
  const text = (offset, s) => [...s].forEach((c, i) => view.setUint8(offset + i, c.charCodeAt(0)));
  text(0, "RIFF");
  view.setUint32(4, 36 + samples.length * 2, true);
  text(8, "WAVE");
  text(12, "fmt ");
  view.setUint32(16, 16, true); // PCM format chunk
  view.setUint16(20, 1, true);
  view.setUint16(22, 1, true); // mono
  view.setUint32(24, rate, true);
  view.setUint32(28, rate * 2, true);
  view.setUint16(32, 2, true);
  view.setUint16(34, 16, true);
  text(36, "data");
  view.setUint32(40, samples.length * 2, true);
  samples.forEach((x, i) => {
    const clipped = Math.max(-1, Math.min(1, x));
    view.setInt16(44 + i * 2, clipped < 0 ? clipped * 0x8000 : clipped * 0x7fff, true);
  });
  return view.buffer;
}

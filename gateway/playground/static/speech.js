// The speech panel: text in, POST /v1/audio/speech, the audio back in an <audio> element with
// a download link. Voices, formats, languages and which controls show come from
// GET /v1/audio/voices (what the served TTS model can do).

import { getJson, postJson } from "./api.js";

const $ = (id) => document.getElementById(id);
let audioUrl = null; // the blob: URL of the last result, revoked when replaced

export async function initSpeech(models) {
  const select = $("speech-model");
  for (const model of models) select.add(new Option(model.id, model.id));
  $("speech-form").addEventListener("submit", (event) => {
    event.preventDefault();
    speak();
  });
  try {
    showAbilities(await getJson("v1/audio/voices"));
  } catch (error) {
    status(`Could not list the voices: ${error.message}`, "error");
  }
}

function showAbilities(info) {
  const voices = $("speech-voice");
  for (const voice of info.voices || []) {
    const label = voice.type === "preset" ? voice.name : `${voice.name} (saved)`;
    voices.add(new Option(label, voice.name));
  }
  const formats = $("speech-format");
  for (const format of info.response_formats || ["wav"]) formats.add(new Option(format, format));
  formats.value = (info.response_formats || []).includes("wav") ? "wav" : formats.value;
  const languages = info.languages || [];
  $("speech-language-label").hidden = languages.length === 0;
  for (const language of languages) $("speech-language").add(new Option(language, language));
  $("speech-instructions-label").hidden = !info.instructions;
  $("speech-speed-label").hidden = !info.speed;
  $("panel-speech").dataset.ready = "true";
}

function status(text, kind = "") {
  const line = $("speech-status");
  line.textContent = text;
  line.dataset.kind = kind;
}

function speechBody() {
  const body = {
    model: $("speech-model").value,
    input: $("speech-input").value,
    voice: $("speech-voice").value,
    response_format: $("speech-format").value,
  };
  const language = $("speech-language").value;
  if (!$("speech-language-label").hidden && language && language !== "auto") {
    body.language = language;
  }
  const instructions = $("speech-instructions").value.trim();
  if (!$("speech-instructions-label").hidden && instructions) body.instructions = instructions;
  const speed = $("speech-speed").valueAsNumber;
  if (!$("speech-speed-label").hidden && Number.isFinite(speed)) body.speed = speed;
  const seed = $("speech-seed").valueAsNumber;
  if (Number.isFinite(seed)) body.seed = seed;
  return body;
}

async function speak() {
  const body = speechBody();
  if (!body.input.trim()) {
    status("Type something to say.", "error");
    return;
  }
  const button = $("speech-go");
  button.disabled = true;
  status("Generating…");
  const started = performance.now();
  try {
    const response = await postJson("v1/audio/speech", body);
    const blob = await response.blob();
    if (audioUrl) URL.revokeObjectURL(audioUrl);
    audioUrl = URL.createObjectURL(blob);
    const audio = $("speech-audio");
    audio.src = audioUrl;
    const download = $("speech-download");
    download.href = audioUrl;
    download.download = `speech.${body.response_format}`;
    $("speech-result").hidden = false;
    const seconds = ((performance.now() - started) / 1000).toFixed(2);
    audio.addEventListener(
      "loadedmetadata",
      () => status(`${audio.duration.toFixed(2)} s of audio in ${seconds} s`, "ok"),
      { once: true },
    );
    status(`${blob.size} bytes in ${seconds} s`, "ok");
  } catch (error) {
    status(error.message, "error");
  } finally {
    button.disabled = false;
  }
}

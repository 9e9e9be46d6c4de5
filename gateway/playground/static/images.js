// The images panel: a prompt, a size, steps and a seed go to POST /v1/images/generations with
// `stream: true`; each preview (`image_generation.partial_image`) shows as it arrives, then the
// picture (`image_generation.completed`), as <img> elements with data: URLs of the base64 file,
// and a download link to the picture.

import { postJson, readEvents } from "./api.js";

const $ = (id) => document.getElementById(id);
const PREVIEWS = 2; // partial_images asked for
const MEDIA_TYPES = { png: "image/png", jpeg: "image/jpeg", webp: "image/webp" };
let controller = null; // the AbortController of the request in flight
let downloadUrl = null; // the blob: URL of the last picture, revoked when replaced

export function initImages(models) {
  const select = $("images-model");
  for (const model of models) select.add(new Option(model.id, model.id));
  $("images-form").addEventListener("submit", (event) => {
    event.preventDefault();
    generate();
  });
  $("images-prompt").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      generate();
    }
  });
  $("images-stop").addEventListener("click", () => controller?.abort());
  $("images-picture").addEventListener("load", (event) => {
    // small pictures (a tiny test model's 64x64) are scaled up without blurring
    event.target.classList.toggle("pixelated", event.target.naturalWidth < 256);
  });
}

function status(text, kind = "") {
  const line = $("images-status");
  line.textContent = text;
  line.dataset.kind = kind;
}

function number(id) {
  const value = $(id).valueAsNumber;
  return Number.isFinite(value) ? value : undefined;
}

// The request: empty fields are not sent, so the model's defaults apply (size `auto`: 1024x1024;
// its own number of denoising steps; a random seed).
function requestBody() {
  const body = {
    model: $("images-model").value,
    prompt: $("images-prompt").value,
    output_format: $("images-format").value,
    stream: true,
    partial_images: PREVIEWS,
  };
  const size = $("images-size").value.trim();
  if (size && size !== "auto") body.size = size;
  const fields = {
    num_inference_steps: number("images-steps"),
    seed: number("images-seed"),
    guidance_scale: number("images-guidance"),
  };
  for (const [name, value] of Object.entries(fields)) if (value !== undefined) body[name] = value;
  return body;
}

function setBusy(busy) {
  $("images-go").hidden = busy;
  $("images-stop").hidden = !busy;
}

function dataUrl(event, format) {
  const type = MEDIA_TYPES[event.output_format || format] || "image/png";
  return `data:${type};base64,${event.b64_json}`;
}

function showPreview(event, format) {
  const thumb = document.createElement("img");
  thumb.src = dataUrl(event, format);
  thumb.alt = `preview ${event.partial_image_index + 1}`;
  thumb.dataset.index = String(event.partial_image_index);
  $("images-previews").append(thumb);
  $("images-previews").hidden = false;
  const picture = $("images-picture");
  picture.src = thumb.src;
  picture.alt = `preview ${event.partial_image_index + 1} of the picture`;
  picture.dataset.state = "preview";
  $("images-result").hidden = false;
  status(`Preview ${event.partial_image_index + 1} of ${PREVIEWS}…`);
}

function showPicture(event, format) {
  const picture = $("images-picture");
  picture.src = dataUrl(event, format);
  picture.alt = $("images-prompt").value;
  picture.dataset.state = "final";
  const bytes = Uint8Array.from(atob(event.b64_json), (c) => c.charCodeAt(0));
  const extension = event.output_format || format;
  if (downloadUrl) URL.revokeObjectURL(downloadUrl);
  downloadUrl = URL.createObjectURL(new Blob([bytes], { type: MEDIA_TYPES[extension] }));
  const download = $("images-download");
  download.href = downloadUrl;
  download.download = `image.${extension}`;
  download.hidden = false;
  $("images-result").hidden = false;
}

async function generate() {
  if (controller) return;
  const body = requestBody();
  if (!body.prompt.trim()) {
    status("Describe the picture first.", "error");
    return;
  }
  $("images-previews").replaceChildren();
  $("images-previews").hidden = true;
  $("images-download").hidden = true;
  const picture = $("images-picture");
  picture.removeAttribute("src");
  picture.dataset.state = "waiting";
  $("images-result").hidden = true;
  controller = new AbortController();
  setBusy(true);
  status("Generating…");
  const started = performance.now();
  let usage = null;
  try {
    const response = await postJson("v1/images/generations", body, {
      signal: controller.signal,
    });
    await readEvents(response, (event) => {
      if (event.type === "error" || event.error) {
        throw new Error(event.error?.message || JSON.stringify(event.error));
      }
      if (event.type?.endsWith(".partial_image")) showPreview(event, body.output_format);
      if (event.type?.endsWith(".completed")) {
        showPicture(event, body.output_format);
        usage = event.usage || null;
      }
    });
    if (picture.dataset.state !== "final") throw new Error("The stream ended without a picture.");
    const seconds = ((performance.now() - started) / 1000).toFixed(2);
    const steps = usage ? ` · ${usage.output_tokens} denoising steps run` : "";
    status(`${body.size || "default size"} in ${seconds} s${steps}`, "ok");
  } catch (error) {
    picture.dataset.state = "error";
    status(error.name === "AbortError" ? "Stopped." : error.message, "error");
  } finally {
    controller.abort(); // a stream that ended in an error event: drop the connection
    controller = null;
    setBusy(false);
  }
}

// The playground's entry: loads the served models (GET /v1/models), shows the tabs their
// capabilities call for, and starts each panel.

import { askForKey, getJson } from "./api.js";
import { initChat } from "./chat.js";
import { initImages } from "./images.js";
import { initSpeech } from "./speech.js";
import { initStatus, refreshHealthBadge } from "./status.js";
import { initTranscribe } from "./transcribe.js";
import { initVideos } from "./videos.js";

// Which capability shows which tab, and the panel that starts with the models having it.
const PANELS = [
  { tab: "chat", capability: "chat", init: initChat },
  { tab: "speech", capability: "speech", init: initSpeech },
  { tab: "transcribe", capability: "transcribe", init: initTranscribe },
  { tab: "images", capability: "image_out", init: initImages },
  { tab: "videos", capability: "video_out", init: initVideos },
];

function showTab(name) {
  for (const button of document.querySelectorAll("#tabs [data-tab]")) {
    const selected = button.dataset.tab === name;
    button.setAttribute("aria-selected", String(selected));
    document.getElementById(`panel-${button.dataset.tab}`).hidden = !selected;
  }
  document.body.dataset.tab = name;
  document.dispatchEvent(new CustomEvent("playground:tab", { detail: name }));
}

function notice(message) {
  const el = document.getElementById("notice");
  el.textContent = message;
  el.hidden = !message;
}

async function loadModels() {
  try {
    return (await getJson("v1/models")).data;
  } catch (error) {
    notice(`Could not list the models: ${error.message}`);
    return [];
  }
}

async function main() {
  document.getElementById("key-button").addEventListener("click", async () => {
    await askForKey("The API key this page sends.");
    if (document.getElementById("key-dialog").returnValue !== "cancel") location.reload();
  });
  for (const button of document.querySelectorAll("#tabs [data-tab]")) {
    button.addEventListener("click", () => showTab(button.dataset.tab));
  }

  refreshHealthBadge();
  const models = await loadModels();
  initStatus(models);
  let first = null;
  for (const panel of PANELS) {
    const served = models.filter((m) => (m.capabilities || []).includes(panel.capability));
    document.getElementById(`tab-${panel.tab}`).hidden = served.length === 0;
    if (served.length) {
      panel.init(served);
      first = first || panel.tab;
    }
  }
  if (models.length && !first) notice("No served model chats, speaks, transcribes or makes images or video.");
  showTab(first || "status");
  document.body.dataset.ready = "true"; // the tests wait for this
}

main();

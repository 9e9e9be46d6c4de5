// The status panel and the header's badge: GET /health (the worker's state; open to all),
// the worker's counters from GET /v1/admin/stats, and the served models with their
// capabilities.

import { apiKey, getJson } from "./api.js";

const $ = (id) => document.getElementById(id);
const BADGE_EVERY_MS = 5000;
const PANEL_EVERY_MS = 2000; // while the status tab is shown
// The counters shown first, in this order; other numeric ones follow.
const COUNTERS = [
  ["active", "requests running"],
  ["waiting", "requests waiting"],
  ["requests_total", "requests served"],
  ["requests_aborted", "requests aborted"],
  ["prompt_tokens", "prompt tokens"],
  ["tokens_generated", "tokens generated"],
];
let panelTimer = null;
let badgeTimer = null;

async function health() {
  try {
    // The key, when the page has one, adds the details (model, worker pid) to the state.
    const key = apiKey();
    const headers = key ? { Authorization: `Bearer ${key}` } : {};
    const response = await fetch("health", { cache: "no-store", headers });
    return { ok: response.ok, body: await response.json() };
  } catch (error) {
    return { ok: false, body: { status: "unreachable", reason: error.message } };
  }
}

export async function refreshHealthBadge() {
  const { ok, body } = await health();
  const badge = $("health-badge");
  badge.textContent = ok ? "ready" : body.status || "down";
  const down = ["failed", "stopped", "unreachable", undefined].includes(body.status);
  badge.dataset.kind = ok ? "ok" : down ? "error" : "warn"; // warn: starting, restarting, ...
  badge.title = body.reason || `worker pid ${body.worker_pid ?? "?"}`;
  clearTimeout(badgeTimer);
  badgeTimer = setTimeout(refreshHealthBadge, BADGE_EVERY_MS);
  return { ok, body };
}

export function initStatus(models) {
  const list = $("status-models");
  list.replaceChildren(
    ...models.map((model) => {
      const item = document.createElement("li");
      const name = document.createElement("strong");
      name.textContent = model.id;
      const caps = document.createElement("span");
      caps.className = "caps";
      caps.textContent = (model.capabilities || []).join(", ");
      item.append(name, " ", caps);
      if (model.aliases?.length) item.append(` (also ${model.aliases.join(", ")})`);
      return item;
    }),
  );
  $("status-refresh").addEventListener("click", refreshPanel);
  document.addEventListener("playground:tab", (event) => {
    clearInterval(panelTimer);
    panelTimer = null;
    if (event.detail === "status") {
      refreshPanel();
      panelTimer = setInterval(refreshPanel, PANEL_EVERY_MS);
    }
  });
}

async function refreshPanel() {
  const { ok, body } = await refreshHealthBadge();
  const details = Object.entries(body).filter(([key]) => key !== "status");
  fill($("status-health"), [["state", ok ? "ready" : body.status], ...details]);
  try {
    const stats = await getJson("v1/admin/stats");
    const named = new Map(COUNTERS);
    const known = COUNTERS.filter(([key]) => key in stats).map(([key, label]) => [label, stats[key]]);
    const others = Object.entries(stats).filter(
      ([key, value]) => typeof value === "number" && !named.has(key) && key !== "pid",
    );
    fill($("status-stats"), [...known, ...others]);
  } catch (error) {
    fill($("status-stats"), [["error", error.message]]);
  }
  $("panel-status").dataset.refreshed = String(Date.now());
}

function fill(list, rows) {
  list.replaceChildren(
    ...rows.flatMap(([key, value]) => {
      const term = document.createElement("dt");
      term.textContent = key;
      const detail = document.createElement("dd");
      detail.textContent = typeof value === "object" ? JSON.stringify(value) : String(value);
      detail.dataset.key = key;
      return [term, detail];
    }),
  );
}

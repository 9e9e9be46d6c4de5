// Talking to this server: the API key (asked for on a 401, kept in sessionStorage, sent as
// Bearer), JSON errors turned into messages, and OpenAI's server-sent events read from a fetch.

const KEY_STORAGE = "vomlx-api-key";
let pendingKey = null; // one dialog for every request refused at once

export function apiKey() {
  return sessionStorage.getItem(KEY_STORAGE) || "";
}

export function setApiKey(key) {
  if (key) sessionStorage.setItem(KEY_STORAGE, key);
  else sessionStorage.removeItem(KEY_STORAGE);
}

// Shows the key dialog; resolves with the key typed, or null when the user cancels.
export function askForKey(reason) {
  if (pendingKey) return pendingKey;
  const dialog = document.getElementById("key-dialog");
  const input = document.getElementById("key-input");
  document.getElementById("key-reason").textContent = reason;
  input.value = apiKey();
  pendingKey = new Promise((resolve) => {
    dialog.addEventListener(
      "close",
      () => {
        pendingKey = null;
        if (dialog.returnValue === "save" && input.value.trim()) {
          setApiKey(input.value.trim());
          resolve(apiKey());
        } else {
          if (dialog.returnValue === "forget") setApiKey("");
          resolve(null);
        }
      },
      { once: true },
    );
  });
  dialog.showModal();
  input.focus();
  return pendingKey;
}

export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

// Paths are relative ("v1/models"), so the page works behind a proxy that mounts the server
// under a prefix.
export async function apiFetch(path, options = {}) {
  for (;;) {
    const headers = new Headers(options.headers || {});
    const key = apiKey();
    if (key) headers.set("Authorization", `Bearer ${key}`);
    const response = await fetch(path, { ...options, headers });
    if (response.status !== 401) return response;
    const reason = key
      ? "The server refused this API key. Enter the right one."
      : "This server asks for an API key.";
    if ((await askForKey(reason)) === null) return response;
  }
}

// The error message of a failed response: OpenAI's {"error": {"message"}} when it is one.
export async function errorOf(response) {
  let body = null;
  let message = `${response.status} ${response.statusText}`;
  try {
    body = await response.json();
    if (body && body.error) {
      message = `${response.status}: ${body.error.message || JSON.stringify(body.error)}`;
    }
  } catch {
    // not JSON: the status line says it
  }
  return new ApiError(response.status, message, body);
}

export async function getJson(path) {
  const response = await apiFetch(path);
  if (!response.ok) throw await errorOf(response);
  return response.json();
}

export async function postJson(path, body, options = {}) {
  const response = await apiFetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
    ...options,
  });
  if (!response.ok) throw await errorOf(response);
  return response;
}

// Calls onData(parsedJson) for each `data:` event of an SSE response until `[DONE]` or the end
// of the body. Comments (the server's keepalives) and other fields are skipped.
export async function readEvents(response, onData) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    buffer += decoder.decode(value || new Uint8Array(), { stream: !done });
    let end;
    while ((end = eventEnd(buffer)) !== null) {
      const [block, rest] = end;
      buffer = rest;
      const data = block
        .split(/\r?\n/)
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).replace(/^ /, ""))
        .join("\n");
      if (!data) continue;
      if (data === "[DONE]") return;
      onData(JSON.parse(data));
    }
    if (done) return;
  }
}

function eventEnd(buffer) {
  const match = /\r?\n\r?\n/.exec(buffer);
  if (!match) return null;
  return [buffer.slice(0, match.index), buffer.slice(match.index + match[0].length)];
}

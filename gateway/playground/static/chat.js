// The chat panel: POST /v1/chat/completions, streamed over SSE or not. Replies render as safe
// markdown, reasoning (`reasoning_content`) in a collapsible block, tool calls as cards that
// take a result; images attach as data URLs (image_url parts) for models with `image_in`.

import { postJson, readEvents } from "./api.js";
import { escapeHtml, renderMarkdown } from "./markdown.js";

const $ = (id) => document.getElementById(id);

const chat = {
  models: [],
  history: [], // the API messages so far, without the system prompt
  attachments: [], // { name, url } data URLs waiting for the next message
  controller: null, // the AbortController of the request in flight
};

export function initChat(models) {
  chat.models = models;
  const select = $("chat-model");
  for (const model of models) select.add(new Option(model.id, model.id));
  select.addEventListener("change", updateAttachButton);
  updateAttachButton();

  $("chat-form").addEventListener("submit", (event) => {
    event.preventDefault();
    send();
  });
  $("chat-input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("chat-form").requestSubmit();
    }
  });
  $("chat-input").addEventListener("paste", (event) => {
    const images = [...(event.clipboardData?.files || [])].filter(isImage);
    if (images.length && takesImages()) {
      event.preventDefault();
      attach(images);
    }
  });
  $("chat-image-input").addEventListener("change", (event) => {
    attach([...event.target.files].filter(isImage));
    event.target.value = "";
  });
  $("chat-stop").addEventListener("click", () => chat.controller?.abort());
  $("chat-clear").addEventListener("click", () => {
    chat.controller?.abort();
    chat.history = [];
    $("chat-log").replaceChildren();
  });
}

function selectedModel() {
  return chat.models.find((m) => m.id === $("chat-model").value);
}

function takesImages() {
  return (selectedModel()?.capabilities || []).includes("image_in");
}

function updateAttachButton() {
  $("chat-attach").hidden = !takesImages();
  if (!takesImages()) {
    chat.attachments = [];
    renderAttachments();
  }
}

const isImage = (file) => file.type.startsWith("image/");

async function attach(files) {
  for (const file of files) {
    chat.attachments.push({ name: file.name, url: await dataUrl(file) });
  }
  renderAttachments();
}

function dataUrl(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

function renderAttachments() {
  const box = $("chat-attachments");
  box.replaceChildren(
    ...chat.attachments.map((image, i) => {
      const item = element("figure", "thumb");
      const img = element("img");
      img.src = image.url;
      img.alt = image.name;
      const remove = element("button", "remove", "×");
      remove.type = "button";
      remove.title = `Remove ${image.name}`;
      remove.addEventListener("click", () => {
        chat.attachments.splice(i, 1);
        renderAttachments();
      });
      item.append(img, remove);
      return item;
    }),
  );
  box.hidden = chat.attachments.length === 0;
}

function element(tag, className, text) {
  const el = document.createElement(tag);
  if (className) el.className = className;
  if (text !== undefined) el.textContent = text;
  return el;
}

// -- sending --------------------------------------------------------------------------------

async function send() {
  if (chat.controller) return; // one request at a time
  const text = $("chat-input").value;
  if (!text.trim() && !chat.attachments.length) return;
  const images = chat.attachments;
  const content = images.length
    ? [
        ...(text.trim() ? [{ type: "text", text }] : []),
        ...images.map((image) => ({ type: "image_url", image_url: { url: image.url } })),
      ]
    : text;
  chat.history.push({ role: "user", content });
  showUserMessage(text, images);
  $("chat-input").value = "";
  chat.attachments = [];
  renderAttachments();
  await generate();
}

function showUserMessage(text, images) {
  const message = element("div", "msg user");
  if (text.trim()) message.append(element("div", "text", text));
  if (images.length) {
    const row = element("div", "images");
    for (const image of images) {
      const img = element("img");
      img.src = image.url;
      img.alt = image.name;
      row.append(img);
    }
    message.append(row);
  }
  appendToLog(message);
}

function appendToLog(node) {
  const log = $("chat-log");
  log.append(node);
  log.scrollTop = log.scrollHeight;
}

function number(id) {
  const value = $(id).valueAsNumber;
  return Number.isFinite(value) ? value : undefined;
}

// The request body from the settings; throws with a message when the tools are not JSON.
function requestBody() {
  const body = { model: $("chat-model").value, messages: [...chat.history] };
  const system = $("chat-system").value;
  if (system.trim()) body.messages.unshift({ role: "system", content: system });
  body.stream = $("chat-stream").checked;
  if (body.stream) body.stream_options = { include_usage: true };
  const fields = {
    temperature: number("chat-temperature"),
    top_p: number("chat-top-p"),
    max_tokens: number("chat-max-tokens"),
    seed: number("chat-seed"),
  };
  for (const [name, value] of Object.entries(fields)) if (value !== undefined) body[name] = value;
  const tools = $("chat-tools").value.trim();
  if (tools) {
    try {
      body.tools = JSON.parse(tools);
    } catch (error) {
      throw new Error(`The tools are not JSON: ${error.message}`);
    }
    body.tool_choice = $("chat-tool-choice").value;
  }
  return body;
}

function setBusy(busy) {
  $("chat-send").hidden = busy;
  $("chat-stop").hidden = !busy;
}

async function generate() {
  const reply = new AssistantReply();
  appendToLog(reply.root);
  let body;
  try {
    body = requestBody();
  } catch (error) {
    reply.fail(error.message);
    return;
  }
  chat.controller = new AbortController();
  setBusy(true);
  try {
    const response = await postJson("v1/chat/completions", body, {
      signal: chat.controller.signal,
    });
    if (body.stream) {
      await readEvents(response, (chunk) => {
        if (chunk.error) throw new Error(chunk.error.message || JSON.stringify(chunk.error));
        reply.chunk(chunk);
      });
    } else {
      reply.whole(await response.json());
    }
    reply.finish();
  } catch (error) {
    reply.fail(error.name === "AbortError" ? "Stopped." : error.message);
  } finally {
    chat.controller.abort(); // a stream that ended in an error event: drop the connection
    chat.controller = null;
    setBusy(false);
  }
  if (reply.hasOutput()) chat.history.push(reply.message());
}

// A tool call's result, typed into its card: once every call of that reply has one, the
// conversation goes on.
async function answerToolCall(reply, call, result) {
  chat.history.push({ role: "tool", tool_call_id: call.id, content: result });
  call.answered = true;
  if (reply.toolCalls.every((c) => c.answered) && !chat.controller) await generate();
}

// -- one assistant reply ----------------------------------------------------------------------

class AssistantReply {
  constructor() {
    this.content = "";
    this.reasoning = "";
    this.toolCalls = []; // { id, name, arguments, card, answered }
    this.started = performance.now();
    this.firstToken = null;
    this.finishReason = null;
    this.usage = null;

    this.root = element("div", "msg assistant");
    this.root.dataset.state = "waiting";
    this.thinking = element("details", "reasoning");
    this.thinking.hidden = true;
    this.thinkingTitle = element("summary", null, "Thinking…");
    this.thinkingText = element("div", "reasoning-text");
    this.thinking.append(this.thinkingTitle, this.thinkingText);
    this.body = element("div", "content markdown");
    this.tools = element("div", "tool-calls");
    this.meta = element("div", "meta", "…");
    this.root.append(this.thinking, this.body, this.tools, this.meta);
    this.pending = false; // a render is scheduled
    this.folded = false; // the reasoning was folded when the answer began
  }

  hasOutput() {
    return Boolean(this.content || this.toolCalls.length);
  }

  message() {
    const message = { role: "assistant", content: this.content || null };
    if (this.toolCalls.length) {
      message.tool_calls = this.toolCalls.map((call) => ({
        id: call.id,
        type: "function",
        function: { name: call.name, arguments: call.arguments },
      }));
    }
    return message;
  }

  chunk(chunk) {
    if (chunk.usage) this.usage = chunk.usage;
    const choice = chunk.choices?.[0];
    if (!choice) return;
    const delta = choice.delta || {};
    if (delta.reasoning_content || delta.content || delta.tool_calls?.length) {
      this.firstToken ??= performance.now();
    }
    if (delta.reasoning_content) this.addReasoning(delta.reasoning_content);
    if (delta.content) this.addContent(delta.content);
    for (const piece of delta.tool_calls || []) this.addToolCallPiece(piece);
    if (choice.finish_reason) this.finishReason = choice.finish_reason;
    this.schedule();
  }

  whole(completion) {
    const choice = completion.choices?.[0] || {};
    const message = choice.message || {};
    if (message.reasoning_content) this.addReasoning(message.reasoning_content);
    if (message.content) this.addContent(message.content);
    (message.tool_calls || []).forEach((call, index) =>
      this.addToolCallPiece({ index, id: call.id, function: call.function }),
    );
    this.finishReason = choice.finish_reason;
    this.usage = completion.usage;
  }

  addReasoning(text) {
    if (!this.reasoning) this.thinking.open = true; // open while it thinks
    this.reasoning += text;
  }

  addContent(text) {
    this.content += text;
  }

  addToolCallPiece(piece) {
    const index = piece.index ?? this.toolCalls.length;
    let call = this.toolCalls[index];
    if (!call) {
      call = { id: piece.id || `call_${index}`, name: "", arguments: "", answered: false };
      this.toolCalls[index] = call;
    }
    if (piece.id) call.id = piece.id;
    if (piece.function?.name) call.name += piece.function.name;
    if (piece.function?.arguments) call.arguments += piece.function.arguments;
  }

  // Re-rendering the whole reply per chunk is cheap at these sizes; once per frame at most.
  schedule() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.render();
    });
  }

  render() {
    if (this.root.dataset.state === "waiting") this.root.dataset.state = "streaming";
    if (this.reasoning) {
      this.thinking.hidden = false;
      this.thinkingText.textContent = this.reasoning;
      if (!this.folded && (this.content || this.toolCalls.length)) {
        this.thinking.open = false; // answering now; the user may unfold it again
        this.folded = true;
      }
    }
    this.body.innerHTML = renderMarkdown(this.content);
    this.renderToolCalls();
    const log = $("chat-log");
    log.scrollTop = log.scrollHeight;
  }

  renderToolCalls() {
    for (const call of this.toolCalls) {
      if (!call.card) {
        call.card = element("div", "tool-call");
        call.title = element("div", "tool-name");
        call.args = element("pre", "tool-args");
        call.card.append(call.title, call.args);
        this.tools.append(call.card);
      }
      call.title.innerHTML = `<span class="label">tool call</span> ${escapeHtml(call.name)}`;
      call.args.textContent = prettyJson(call.arguments);
    }
  }

  finish() {
    this.render();
    this.root.dataset.state = "done";
    const elapsed = (performance.now() - this.started) / 1000;
    this.thinkingTitle.textContent = "Reasoning";
    const parts = [this.finishReason || "done"];
    const tokens = this.usage?.completion_tokens;
    if (tokens !== undefined) parts.push(`${tokens} tokens`);
    // Streamed only: the first token's time, and the decode rate once it is measurable (chunks
    // that arrive in one network read all land at the same instant).
    const decode = this.firstToken === null ? 0 : (performance.now() - this.firstToken) / 1000;
    if (tokens > 1 && decode >= 0.1) parts.push(`${((tokens - 1) / decode).toFixed(1)} tok/s`);
    if (this.firstToken !== null) {
      parts.push(`first token ${((this.firstToken - this.started) / 1000).toFixed(2)} s`);
    }
    parts.push(`${elapsed.toFixed(2)} s`);
    this.meta.textContent = parts.join(" · ");
    for (const call of this.toolCalls) this.addResultForm(call);
  }

  addResultForm(call) {
    const form = element("form", "tool-result");
    const input = element("input");
    input.placeholder = "The tool's result, sent as a tool message";
    const button = element("button", "small", "Send result");
    button.type = "submit";
    form.append(input, button);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      form.replaceChildren(element("div", "tool-result-sent", `result: ${input.value}`));
      answerToolCall(this, call, input.value);
    });
    call.card.append(form);
  }

  fail(message) {
    this.render();
    this.root.dataset.state = "error";
    this.meta.textContent = "";
    this.root.append(element("div", "error", message));
  }
}

function prettyJson(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text; // still streaming, or not JSON
  }
}

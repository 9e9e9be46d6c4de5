// The API docs page: fetches this server's openapi.json (with the API key, asked for on a 401
// and kept in sessionStorage like the playground's) and renders every operation, grouped by
// tag: method, path, summary, description, parameters, request body fields and responses.
// Plain DOM, no innerHTML: every text from the document goes in as text.

import { apiKey, askForKey } from "../../playground/api.js"; // one key for both pages

const MAX_DEPTH = 4; // how deep nested object fields are listed
const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];
let doc = null;

// Relative, so the page works behind a proxy that mounts the server under a prefix.
async function fetchDocument() {
  for (;;) {
    const key = apiKey();
    const headers = key ? { Authorization: `Bearer ${key}` } : {};
    const response = await fetch("openapi.json", { headers });
    if (response.status !== 401) return response;
    const reason = key
      ? "The server refused this API key. Enter the right one."
      : "This server asks for an API key to show its API document.";
    if ((await askForKey(reason)) === null) return response;
  }
}

// -- small DOM helpers ------------------------------------------------------------------------

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else if (name === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Text with `code` spans, as nodes.
function inline(text) {
  return String(text)
    .split(/(`[^`]+`)/)
    .filter(Boolean)
    .map((piece) =>
      piece.length > 2 && piece.startsWith("`") && piece.endsWith("`")
        ? el("code", { text: piece.slice(1, -1) })
        : document.createTextNode(piece),
    );
}

// Descriptions: paragraphs on blank lines, `code` spans; everything else stays text.
function prose(text, tag = "div") {
  const box = el(tag, { class: "prose" });
  if (!text) return box;
  for (const paragraph of String(text).split(/\n\s*\n/)) box.append(el("p", {}, inline(paragraph)));
  return box;
}

function notice(message) {
  const node = document.getElementById("notice");
  node.textContent = message || "";
  node.hidden = !message;
}

// -- schemas ----------------------------------------------------------------------------------

function refName(ref) {
  return ref.split("/").pop();
}

// The schema a local `$ref` ("#/components/schemas/X") points to; other refs stay as they are.
function resolve(schema) {
  let seen = 0;
  while (schema && typeof schema.$ref === "string" && schema.$ref.startsWith("#/") && seen < 32) {
    let node = doc;
    for (const part of schema.$ref.slice(2).split("/")) {
      node = node ? node[part.replace(/~1/g, "/").replace(/~0/g, "~")] : undefined;
    }
    if (!node) return {};
    schema = node;
    seen += 1;
  }
  return schema || {};
}

function isNull(schema) {
  return schema && (schema.type === "null" || (schema.const === null && "const" in schema));
}

// `X | null` -> [X, true]; anything else -> [schema, false].
function nonNull(schema) {
  const alternatives = schema.anyOf || schema.oneOf;
  if (Array.isArray(alternatives)) {
    const rest = alternatives.filter((s) => !isNull(resolve(s)));
    if (rest.length === 1 && rest.length < alternatives.length) return [rest[0], true];
  }
  if (Array.isArray(schema.type) && schema.type.includes("null")) {
    const types = schema.type.filter((t) => t !== "null");
    const copy = { ...schema, type: types.length === 1 ? types[0] : types };
    if (Array.isArray(schema.enum)) copy.enum = schema.enum.filter((v) => v !== null);
    return [copy, true];
  }
  return [schema, false];
}

function typeLabel(schema, depth = 0) {
  if (!schema || depth > 6) return "any";
  if (typeof schema.$ref === "string") return refName(schema.$ref);
  const [inner, nullable] = nonNull(schema);
  if (nullable) return `${typeLabel(inner, depth + 1)} | null`;
  if ("const" in schema) return JSON.stringify(schema.const);
  const alternatives = schema.anyOf || schema.oneOf;
  if (Array.isArray(alternatives)) {
    return alternatives.map((s) => typeLabel(s, depth + 1)).join(" | ");
  }
  if (Array.isArray(schema.allOf) && schema.allOf.length === 1) {
    return typeLabel(schema.allOf[0], depth + 1);
  }
  const type = Array.isArray(schema.type) ? schema.type.join(" | ") : schema.type;
  if (type === "array") return `array of ${typeLabel(schema.items, depth + 1)}`;
  if (type === "string" && schema.format === "binary") return "binary";
  if (type === "object" && schema.additionalProperties && typeof schema.additionalProperties === "object") {
    return `map of ${typeLabel(schema.additionalProperties, depth + 1)}`;
  }
  if (type) return type;
  if (schema.properties) return "object";
  return "any";
}

function constraints(schema) {
  const [s] = nonNull(resolve(schema));
  const out = [];
  if (Array.isArray(s.enum)) out.push(`one of: ${s.enum.map((v) => JSON.stringify(v)).join(", ")}`);
  if ("default" in s) out.push(`default ${JSON.stringify(s.default)}`);
  if ("minimum" in s) out.push(`≥ ${s.minimum}`);
  if ("exclusiveMinimum" in s) out.push(`> ${s.exclusiveMinimum}`);
  if ("maximum" in s) out.push(`≤ ${s.maximum}`);
  if ("exclusiveMaximum" in s) out.push(`< ${s.exclusiveMaximum}`);
  if ("minLength" in s) out.push(`at least ${s.minLength} characters`);
  if ("maxLength" in s) out.push(`at most ${s.maxLength} characters`);
  if ("minItems" in s) out.push(`at least ${s.minItems} items`);
  if ("maxItems" in s) out.push(`at most ${s.maxItems} items`);
  if (s.uniqueItems) out.push("unique items");
  if ("pattern" in s) out.push(`pattern ${s.pattern}`);
  if (s.format && s.format !== "binary") out.push(`format ${s.format}`);
  if (s.contentMediaType) out.push(`${s.contentMediaType} text`);
  if (s.additionalProperties === false) out.push("no other keys");
  return out;
}

// The object schema whose fields to list below a field: itself, its non-null branch, or its
// array's items.
function nestedObject(schema) {
  let [s] = nonNull(resolve(schema));
  s = resolve(s);
  let suffix = "";
  if (s.type === "array" && s.items) {
    s = resolve(nonNull(resolve(s.items))[0]);
    suffix = "[]";
  }
  if (s.contentSchema) s = resolve(s.contentSchema);
  if (s.properties || s.oneOf || s.anyOf) return [s, suffix];
  return [null, suffix];
}

function variantName(schema, index) {
  const s = resolve(schema);
  if (schema.$ref) return refName(schema.$ref);
  const type = s.properties && s.properties.type;
  if (type && "const" in type) return String(type.const);
  if (s.title) return s.title;
  return `variant ${index + 1}`;
}

// Rows of a fields table: each property (dotted path for nested ones) with its type,
// whether it is required, its constraints and its description.
function fieldRows(schema, prefix, depth, seen, rows) {
  const s = resolve(schema);
  const required = new Set(s.required || []);
  for (const [name, property] of Object.entries(s.properties || {})) {
    const resolved = resolve(property);
    const path = prefix + name;
    rows.push({
      name: path,
      type: typeLabel(property),
      required: required.has(name),
      constraints: constraints(property),
      description: property.description || resolved.description || "",
      depth,
    });
    const ref = property.$ref || (property.items && property.items.$ref) || "";
    const [inner, suffix] = nestedObject(property);
    if (inner && inner.properties && depth < MAX_DEPTH && !(ref && seen.has(ref))) {
      const next = new Set(seen);
      if (ref) next.add(ref);
      fieldRows(inner, `${path}${suffix}.`, depth + 1, next, rows);
    }
  }
  return rows;
}

function fieldsTable(schema) {
  const rows = fieldRows(schema, "", 0, new Set(), []);
  if (!rows.length) return null;
  const body = el("tbody");
  for (const row of rows) {
    body.append(
      el(
        "tr",
        { dataset: { depth: String(row.depth) } },
        el("td", { class: "field" }, el("code", { text: row.name })),
        el("td", { class: "type" }, el("code", { text: row.type })),
        el("td", { class: "required" }, row.required ? el("span", { class: "tag", text: "required" }) : ""),
        el(
          "td",
          { class: "about" },
          row.constraints.length ? el("div", { class: "constraints", text: row.constraints.join("; ") }) : null,
          prose(row.description),
        ),
      ),
    );
  }
  return el(
    "table",
    { class: "fields" },
    el("thead", {}, el("tr", {}, el("th", { text: "Field" }), el("th", { text: "Type" }), el("th", { text: "" }), el("th", { text: "Description" }))),
    body,
  );
}

// A schema: its type and description, then its fields; alternatives one after another.
function schemaView(schema, depth = 0) {
  const s = resolve(schema);
  const box = el("div", { class: "schema" });
  box.append(el("div", { class: "schema-type" }, el("code", { text: typeLabel(schema) })));
  if (s.description && depth === 0) box.append(prose(s.description));
  const limits = constraints(schema);
  if (limits.length) box.append(el("div", { class: "constraints", text: limits.join("; ") }));
  if (s.contentSchema) {
    box.append(el("div", { class: "muted", text: "Its JSON:" }), schemaView(s.contentSchema, depth + 1));
    return box;
  }
  const alternatives = s.oneOf || s.anyOf;
  const [inner, nullable] = nonNull(s);
  if (nullable && inner !== s) {
    box.append(schemaView(inner, depth + 1));
    return box;
  }
  if (Array.isArray(alternatives) && depth < 3) {
    alternatives.forEach((alternative, index) => {
      const details = el("details", { class: "variant" }, el("summary", { text: variantName(alternative, index) }));
      details.append(schemaView(alternative, depth + 1));
      box.append(details);
    });
    return box;
  }
  if (s.type === "array" && s.items) {
    const [items] = nestedObject(s);
    if (items) box.append(schemaView(s.items, depth + 1));
    return box;
  }
  if (s.properties && s.properties.data && s.properties.event) {
    // A server-sent event: its name and its data's JSON
    const table = fieldsTable(s);
    if (table) box.append(table);
    const data = resolve(s.properties.data);
    const payload = data.contentSchema ? data : data.else || (data.anyOf || []).find((d) => d.contentSchema);
    if (payload && payload.contentSchema) {
      box.append(el("div", { class: "muted", text: "Each event's data:" }), schemaView(payload.contentSchema, depth + 1));
    }
    return box;
  }
  const table = fieldsTable(s);
  if (table) box.append(table);
  return box;
}

// -- operations -------------------------------------------------------------------------------

function parametersView(parameters) {
  if (!parameters.length) return null;
  const body = el("tbody");
  for (const raw of parameters) {
    const p = resolve(raw);
    body.append(
      el(
        "tr",
        {},
        el("td", { class: "field" }, el("code", { text: p.name })),
        el("td", { class: "type" }, el("code", { text: `${p.in}: ${typeLabel(p.schema || {})}` })),
        el("td", { class: "required" }, p.required ? el("span", { class: "tag", text: "required" }) : ""),
        el("td", { class: "about" }, prose(p.description || "")),
      ),
    );
  }
  return el("section", {}, el("h4", { text: "Parameters" }), el("table", { class: "fields" }, body));
}

function requestBodyView(requestBody) {
  if (!requestBody) return null;
  const body = resolve(requestBody);
  const section = el("section", {}, el("h4", { text: body.required ? "Request body (required)" : "Request body" }));
  if (body.description) section.append(prose(body.description));
  for (const [media, object] of Object.entries(body.content || {})) {
    section.append(el("div", { class: "media" }, el("code", { text: media })));
    if (object.schema) section.append(schemaView(object.schema));
  }
  return section;
}

function firstLine(text) {
  return String(text || "").split(/\n/)[0];
}

function statusClass(status) {
  return `status s${String(status)[0]}`;
}

function responsesView(responses) {
  const section = el("section", {}, el("h4", { text: "Responses" }));
  for (const [status, raw] of Object.entries(responses || {})) {
    const response = resolve(raw);
    const details = el(
      "details",
      { class: "response", open: status.startsWith("2") },
      el("summary", {}, el("span", { class: statusClass(status), text: status }), " ", inline(firstLine(response.description))),
    );
    if (String(response.description || "").includes("\n")) details.append(prose(response.description));
    const headers = Object.entries(response.headers || {});
    if (headers.length) {
      details.append(
        el(
          "div",
          { class: "headers" },
          "Headers: ",
          headers.map(([name, header], i) => [i ? ", " : "", el("code", { text: name }), resolve(header).required ? "" : " (sometimes)"]),
        ),
      );
    }
    for (const [media, object] of Object.entries(response.content || {})) {
      const block = el("div", { class: "media-block" }, el("div", { class: "media" }, el("code", { text: media })));
      if (object.schema) block.append(schemaView(object.schema));
      details.append(block);
    }
    section.append(details);
  }
  return section;
}

function operationView(path, method, operation) {
  const id = operation.operationId || `${method}-${path}`;
  const card = el("article", { class: "operation", id, dataset: { search: [method, path, id, operation.summary || ""].join(" ").toLowerCase() } });
  const head = el(
    "details",
    { class: "operation-details" },
    el(
      "summary",
      {},
      el("span", { class: `method m-${method}`, text: method.toUpperCase() }),
      el("code", { class: "path", text: path }),
      el("span", { class: "summary", text: operation.summary || "" }),
      operation.deprecated ? el("span", { class: "tag", text: "deprecated" }) : null,
    ),
  );
  const parts = [
    el("div", { class: "operation-id" }, "operationId ", el("code", { text: id })),
    operation.description ? prose(operation.description) : null,
    parametersView(operation.parameters || []),
    requestBodyView(operation.requestBody),
    responsesView(operation.responses),
  ];
  head.append(...parts.filter(Boolean));
  card.append(head);
  return card;
}

function collectOperations() {
  const groups = new Map();
  for (const [path, item] of Object.entries(doc.paths || {})) {
    for (const method of METHODS) {
      const operation = item[method];
      if (!operation) continue;
      const merged = { ...operation, parameters: [...(item.parameters || []), ...(operation.parameters || [])] };
      const tag = (operation.tags && operation.tags[0]) || "Other";
      if (!groups.has(tag)) groups.set(tag, []);
      groups.get(tag).push([path, method, merged]);
    }
  }
  const order = (doc.tags || []).map((t) => t.name);
  const rank = (tag) => (order.includes(tag) ? order.indexOf(tag) : order.length);
  return [...groups.entries()].sort((a, b) => rank(a[0]) - rank(b[0]));
}

function tagDescription(name) {
  const tag = (doc.tags || []).find((t) => t.name === name);
  return tag ? tag.description : "";
}

function render() {
  const info = doc.info || {};
  if (info.title) {
    document.title = `${info.title} API`;
    document.getElementById("title").textContent = info.title;
  }
  const version = document.getElementById("version");
  version.textContent = [info.version, doc.openapi && `OpenAPI ${doc.openapi}`].filter(Boolean).join(" · ");
  version.hidden = !version.textContent;
  const intro = document.getElementById("intro");
  intro.replaceChildren(prose(info.description || ""));
  intro.hidden = !info.description;

  const main = document.getElementById("operations");
  const toc = document.getElementById("toc");
  toc.replaceChildren();
  for (const [tag, operations] of collectOperations()) {
    const slug = `tag-${tag.toLowerCase().replace(/[^a-z0-9]+/g, "-")}`;
    const section = el("section", { class: "tag-group", id: slug }, el("h2", { text: tag }));
    const about = tagDescription(tag);
    if (about) section.append(prose(about));
    const list = el("ul");
    for (const [path, method, operation] of operations) {
      const card = operationView(path, method, operation);
      section.append(card);
      list.append(
        el(
          "li",
          { dataset: { target: card.id } },
          el("a", { href: `#${card.id}` }, el("span", { class: `method small m-${method}`, text: method.toUpperCase() }), " ", path),
        ),
      );
    }
    toc.append(el("div", { class: "toc-group" }, el("a", { class: "toc-tag", href: `#${slug}`, text: tag }), list));
    main.append(section);
  }
  document.getElementById("loading").hidden = true;
  openFromHash();
}

function openFromHash() {
  const id = decodeURIComponent(location.hash.slice(1));
  const target = id && document.getElementById(id);
  if (!target) return;
  const details = target.querySelector(".operation-details");
  if (details) details.open = true;
  target.scrollIntoView();
}

function applyFilter(text) {
  const words = text.toLowerCase().split(/\s+/).filter(Boolean);
  for (const card of document.querySelectorAll(".operation")) {
    const haystack = card.dataset.search;
    card.hidden = !words.every((w) => haystack.includes(w));
    const item = document.querySelector(`.toc li[data-target="${CSS.escape(card.id)}"]`);
    if (item) item.hidden = card.hidden;
  }
  for (const group of document.querySelectorAll(".tag-group")) {
    group.hidden = !group.querySelector(".operation:not([hidden])");
  }
}

function offerDownload(text) {
  const link = document.getElementById("download");
  link.href = URL.createObjectURL(new Blob([text], { type: "application/json" }));
  link.download = "openapi.json";
  link.hidden = false;
}

async function main() {
  document.getElementById("key-button").addEventListener("click", async () => {
    await askForKey("The API key this page sends.");
    if (document.getElementById("key-dialog").returnValue !== "cancel") location.reload();
  });
  document.getElementById("filter").addEventListener("input", (event) => applyFilter(event.target.value));
  window.addEventListener("hashchange", openFromHash);
  try {
    const response = await fetchDocument();
    if (!response.ok) {
      let message = `${response.status} ${response.statusText}`;
      try {
        const body = await response.json();
        if (body && body.error && body.error.message) message = `${response.status}: ${body.error.message}`;
      } catch {
        // not JSON: the status line says it
      }
      throw new Error(message);
    }
    const text = await response.text();
    doc = JSON.parse(text);
    render();
    offerDownload(text);
  } catch (error) {
    document.getElementById("loading").hidden = true;
    notice(`Could not load openapi.json: ${error.message}`);
  }
  document.body.dataset.ready = "true"; // the tests wait for this
}

main();

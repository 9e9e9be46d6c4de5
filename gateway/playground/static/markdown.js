// A small, safe markdown subset for model replies: the text is HTML-escaped first, and only
// the markup written here is added: fenced code blocks, inline code, headings, bold, italics,
// bulleted and numbered lists, paragraphs and links (http, https and mailto only).
// Unclosed constructs (a reply still streaming) render as far as they go.

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(text) {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

export function renderMarkdown(source) {
  const lines = source.replace(/\0/g, "").replace(/\r\n?/g, "\n").split("\n");
  const out = [];
  let paragraph = [];
  let list = null; // { tag: "ul" | "ol", items: [] }

  const flushParagraph = () => {
    if (paragraph.length) out.push(`<p>${paragraph.map(inline).join("<br>")}</p>`);
    paragraph = [];
  };
  const flushList = () => {
    if (list) {
      const items = list.items.map((item) => `<li>${inline(item)}</li>`).join("");
      out.push(`<${list.tag}>${items}</${list.tag}>`);
    }
    list = null;
  };

  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = /^\s*(`{3,}|~{3,})\s*([\w+#.-]*)/.exec(line);
    if (fence) {
      flushParagraph();
      flushList();
      const code = [];
      const closer = new RegExp(`^\\s*${fence[1][0] === "`" ? "`" : "~"}{${fence[1].length},}\\s*$`);
      for (i++; i < lines.length && !closer.test(lines[i]); i++) code.push(lines[i]);
      const lang = fence[2] ? ` class="language-${escapeHtml(fence[2])}"` : "";
      out.push(`<pre><code${lang}>${escapeHtml(code.join("\n"))}</code></pre>`);
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    const bullet = /^\s*[-*+]\s+(.*)$/.exec(line);
    const numbered = /^\s*\d{1,9}[.)]\s+(.*)$/.exec(line);
    if (heading) {
      flushParagraph();
      flushList();
      const level = heading[1].length;
      out.push(`<h${level}>${inline(heading[2])}</h${level}>`);
    } else if (bullet || numbered) {
      flushParagraph();
      const tag = bullet ? "ul" : "ol";
      if (list && list.tag !== tag) flushList();
      if (!list) list = { tag, items: [] };
      list.items.push((bullet || numbered)[1]);
    } else if (!line.trim()) {
      flushParagraph();
      flushList();
    } else if (list && /^\s+\S/.test(line)) {
      list.items[list.items.length - 1] += ` ${line.trim()}`; // a list item's continuation
    } else {
      flushList();
      paragraph.push(line);
    }
  }
  flushParagraph();
  flushList();
  return out.join("");
}

// Inline markup of one block's text: code spans first (nothing inside them is markup), then
// links, bold and italics over the escaped rest.
function inline(text) {
  const spans = [];
  const hold = (html) => `\u0000${spans.push(html) - 1}\u0000`;
  let html = text.replace(/(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/g, (_, __, code) =>
    hold(`<code>${escapeHtml(code.trim() || code)}</code>`),
  );
  html = escapeHtml(html);
  html = html.replace(/\[([^\]\n]+)\]\(([^)\s]+)\)/g, (whole, label, href) =>
    safeHref(href)
      ? hold(`<a href="${href}" target="_blank" rel="noopener noreferrer">${emphasis(label)}</a>`)
      : whole,
  );
  html = emphasis(html);
  while (html.includes("\u0000")) {
    html = html.replace(/\u0000(\d+)\u0000/g, (_, n) => spans[Number(n)]); // links hold code
  }
  return html;
}

function emphasis(html) {
  return html
    .replace(/\*\*(?=\S)([\s\S]*?\S)\*\*/g, "<strong>$1</strong>")
    .replace(/(^|[^*\w])\*(?=[^\s*])([^*]*?[^\s*])\*(?![*\w])/g, "$1<em>$2</em>");
}

// The href is already escaped (no quotes or angle brackets left); only these schemes link.
function safeHref(href) {
  return /^(https?:\/\/|mailto:)/i.test(href.replace(/&amp;/g, "&"));
}

// The task page's live part: while the task is unresolved, poll its status and refresh the page's
// parts when it changes; while the shown run is running, follow its live log. Without this script
// the page still shows the truth on a reload. Log text only ever becomes text nodes (textContent),
// with colours as class names from a fixed set: nothing in a log is ever markup or script.
"use strict";
(() => {
  const TAIL = 1024 * 1024; // characters of log kept on the page (ui/task_log.py's TAIL_BYTES)
  const LINE_SEARCH = 64 * 1024;
  const POLL_MS = 2000;

  // ANSI SGR to classes: the same rules as ui/ansi.py.
  const PALETTE = [
    [0, 0, 0], [205, 0, 0], [0, 205, 0], [205, 205, 0], [0, 0, 238], [205, 0, 205], [0, 205, 205],
    [229, 229, 229], [127, 127, 127], [255, 0, 0], [0, 255, 0], [255, 255, 0], [92, 92, 255],
    [255, 0, 255], [0, 255, 255], [255, 255, 255],
  ];
  const CUBE = [0, 95, 135, 175, 215, 255];
  const TOKEN =
    /\x1b\[([0-?]*)([ -/]*)([@-~])|\x1b\][^\x07\x1b]{0,4096}(?:\x07|\x1b\\)|\x1b[\x20-\x2f]*[\x30-\x7e]?|\r\n?|[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f-\x9f]+/g;
  const WHOLE_ESCAPE = /^(?:\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]{0,4096}(?:\x07|\x1b\\)|\x1b[\x20-\x2f]*[\x30-\x5a\x5c\x5e-\x7e])/;
  const PLAIN = { fg: null, bg: null, bold: false, faint: false, italic: false, underline: false };
  const FLAGS = { 1: ["bold", true], 2: ["faint", true], 3: ["italic", true], 4: ["underline", true],
    23: ["italic", false], 24: ["underline", false] };

  function nearest(r, g, b) {
    let best = 0, bestDistance = Infinity;
    PALETTE.forEach(([pr, pg, pb], i) => {
      const d = (pr - r) ** 2 + (pg - g) ** 2 + (pb - b) ** 2;
      if (d < bestDistance) { best = i; bestDistance = d; }
    });
    return best;
  }

  function colour256(n) {
    if (n < 16) return n;
    if (n < 232) { n -= 16; return nearest(CUBE[Math.floor(n / 36)], CUBE[Math.floor(n / 6) % 6], CUBE[n % 6]); }
    const level = 8 + (n - 232) * 10;
    return nearest(level, level, level);
  }

  function extended(codes, i) {
    const kind = codes[i + 1];
    if (kind === 5 && i + 2 < codes.length) return [codes[i + 2] < 256 ? colour256(codes[i + 2]) : null, i + 3];
    if (kind === 2 && i + 4 < codes.length) {
      const [r, g, b] = codes.slice(i + 2, i + 5).map((c) => Math.min(c, 255));
      return [nearest(r, g, b), i + 5];
    }
    return [null, codes.length];
  }

  function applySgr(style, params) {
    const codes = params ? params.split(/[;:]/).map((p) => (/^\d+$/.test(p) ? Number(p) : 0)) : [0];
    let s = { ...style };
    for (let i = 0; i < codes.length; ) {
      const code = codes[i++];
      if (code === 0) s = { ...PLAIN };
      else if (FLAGS[code]) s[FLAGS[code][0]] = FLAGS[code][1];
      else if (code === 22) { s.bold = false; s.faint = false; }
      else if ((code >= 30 && code <= 37) || (code >= 90 && code <= 97)) s.fg = code < 90 ? code - 30 : code - 82;
      else if ((code >= 40 && code <= 47) || (code >= 100 && code <= 107)) s.bg = code < 100 ? code - 40 : code - 92;
      else if (code === 39) s.fg = null;
      else if (code === 49) s.bg = null;
      else if (code === 38 || code === 48) {
        const [colour, next] = extended(codes, i - 1);
        i = next;
        if (colour !== null) s[code === 38 ? "fg" : "bg"] = colour;
      }
    }
    return s;
  }

  function classes(s) {
    const names = [];
    if (s.fg !== null) names.push(`ansi-fg-${s.fg}`);
    if (s.bg !== null) names.push(`ansi-bg-${s.bg}`);
    for (const flag of ["bold", "faint", "italic", "underline"]) if (s[flag]) names.push(`ansi-${flag}`);
    return names.join(" ");
  }

  // Text in pieces as it streams: an escape sequence or CR LF split between pieces is held back.
  class Converter {
    constructor() { this.style = { ...PLAIN }; this.held = ""; }

    // The nodes for `text` (text nodes and spans whose textContent is the text).
    feed(text, last) {
      text = this.held + text;
      this.held = "";
      if (!last) {
        const escape = text.lastIndexOf("\x1b");
        if (escape >= 0 && text.length - escape < 4200 && !WHOLE_ESCAPE.test(text.slice(escape))) {
          this.held = text.slice(escape);
          text = text.slice(0, escape);
        } else if (text.endsWith("\r")) {
          this.held = "\r";
          text = text.slice(0, -1);
        }
      }
      const nodes = [];
      let position = 0;
      const emit = (end) => {
        if (end <= position) return;
        const piece = text.slice(position, end), names = classes(this.style);
        if (!names) { nodes.push(document.createTextNode(piece)); return; }
        const span = document.createElement("span");
        span.className = names;
        span.textContent = piece;
        nodes.push(span);
      };
      TOKEN.lastIndex = 0;
      for (let m; (m = TOKEN.exec(text)); ) {
        emit(m.index);
        position = m.index + m[0].length;
        if (m[0][0] === "\r") nodes.push(document.createTextNode("\n"));
        else if (m[3] === "m" && !m[2]) this.style = applySgr(this.style, m[1]);
      }
      emit(text.length);
      return nodes;
    }
  }


  // The log -------------------------------------------------------------------------------------
  let following = null; // the AbortController of the stream being followed

  function showHidden(section, hidden) {
    const note = section.querySelector("#log-hidden"), count = section.querySelector("#log-hidden-bytes");
    if (!note || !count) return;
    note.hidden = hidden <= 0;
    count.textContent = String(hidden);
  }

  // Drop `excess` characters from the start of the log on the page (ending at a line's end if one
  // is near), cutting into a node if need be; answers how many were dropped.
  function trim(pre, excess) {
    let dropped = 0;
    while (excess > 0 && pre.firstChild) {
      const node = pre.firstChild, text = node.textContent;
      if (text.length <= excess) {
        node.remove();
        dropped += text.length;
        excess -= text.length;
        continue;
      }
      const newline = text.indexOf("\n", excess - 1);
      const cut = newline >= 0 && newline - excess < LINE_SEARCH ? newline + 1 : excess;
      node.textContent = text.slice(cut);
      dropped += cut;
      excess = 0;
    }
    return dropped;
  }

  if (window.taskyard) Object.assign(window.taskyard, { AnsiConverter: Converter, trimLog: trim }); // for the tests

  // Follow the live log of the section's run from the start of its last TAIL bytes: the stream the
  // server read it from (`data-stream`) is asked to start there (`start=`); the artifact's URL
  // (whose 303 would drop the query) is followed from the log's first byte. True once the stream
  // has ended, false if it could not be opened (no live log yet: tried again later).
  async function followLog(section) {
    const pre = section.querySelector("#log-text");
    if (!pre || following) return false;
    const controller = new AbortController();
    following = controller;
    try {
      const skip = Math.max(0, Number(section.dataset.bytes || 0) - TAIL);
      const url = new URL(section.dataset.stream || section.dataset.url, window.location.href);
      const from = section.dataset.stream ? skip : 0; // where the answer starts
      if (from > 0) url.searchParams.set("start", String(from));
      const reply = await fetch(url, { signal: controller.signal, cache: "no-store" });
      if (reply.status === 401 || reply.status === 403) section.dataset.live = "refused"; // not public
      if (!reply.ok || !reply.body) return false;
      const reader = reply.body.getReader(), decoder = new TextDecoder("utf-8"), converter = new Converter();
      let seen = from, shown = 0, hidden = 0, toLineStart = skip > 0, fresh = true;
      const add = (text, last) => {
        if (toLineStart) {
          const newline = text.indexOf("\n");
          if (newline >= 0 && newline < LINE_SEARCH) { hidden += newline + 1; text = text.slice(newline + 1); }
          toLineStart = false;
        }
        if (fresh && !text) return; // nothing new yet: the server's rendering stays
        if (fresh) { pre.textContent = ""; fresh = false; }
        const nodes = converter.feed(text, last);
        pre.append(...nodes);
        shown += text.length;
        if (shown > TAIL * 1.25) {
          const dropped = trim(pre, shown - TAIL);
          hidden += dropped;
          shown -= dropped;
        }
        showHidden(section, skip + hidden);
        if (pre.scrollHeight - pre.scrollTop - pre.clientHeight < 80) pre.scrollTop = pre.scrollHeight;
      };
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        let chunk = value;
        if (seen + chunk.length <= skip) { seen += chunk.length; continue; }
        if (seen < skip) chunk = chunk.subarray(skip - seen);
        seen = Math.max(seen, skip) + chunk.length;
        add(decoder.decode(chunk, { stream: true }), false);
      }
      add(decoder.decode(), true);
      const said = section.querySelector("#log-follow");
      if (said) said.textContent = "The live log has ended.";
      return true;
    } catch (error) {
      return false; // aborted, or the connection dropped: the next status poll decides what to do
    } finally {
      if (following === controller) following = null;
    }
  }

  function startFollowing() {
    const section = document.getElementById("task-log");
    if (!section || section.dataset.live !== "true" || following) return;
    const said = section.querySelector("#log-follow");
    if (said) said.textContent = "Following the log live.";
    followLog(section).then((ended) => { if (ended) section.dataset.live = "ended"; });
  }

  // The status -------------------------------------------------------------------------------------
  const PARTS = ["task-status", "task-runs", "task-artifacts", "task-relations"];

  async function refresh(root) {
    const reply = await fetch(window.location.href, { headers: { accept: "text/html" }, cache: "no-store" });
    if (!reply.ok) return;
    const doc = new DOMParser().parseFromString(await reply.text(), "text/html");
    const fresh = doc.getElementById("task");
    if (!fresh) return;
    for (const id of PARTS) {
      const here = document.getElementById(id), there = doc.getElementById(id);
      if (here && there) here.replaceWith(there);
    }
    const here = document.getElementById("task-log"), there = doc.getElementById("task-log");
    const live = (section) => (["true", "ended", "refused"].includes(section.dataset.live) ? "live" : "done");
    if (here && there && (here.dataset.run !== there.dataset.run || live(here) !== live(there))) {
      if (following) following.abort();
      following = null;
      here.replaceWith(there);
      toLogEnd();
    }
    root.dataset.signature = fresh.dataset.signature;
    root.dataset.resolved = fresh.dataset.resolved;
  }

  async function poll(root) {
    try {
      const reply = await fetch(root.dataset.statusUrl, { cache: "no-store" });
      if (reply.ok) {
        const status = (await reply.json()).status;
        const signature = `${status.state}:${status.runs.map((run) => run.state).join(",")}`;
        if (signature !== root.dataset.signature) await refresh(root);
      }
    } catch (error) {
      // the server is away for a moment: look again at the next tick
    }
    startFollowing();
    if (root.dataset.resolved !== "true") window.setTimeout(() => poll(root), POLL_MS);
  }

  // A log is read from its end (where a failure shows): scroll there.
  function toLogEnd() {
    const pre = document.getElementById("log-text");
    if (pre) pre.scrollTop = pre.scrollHeight;
  }

  function start() {
    const root = document.getElementById("task");
    if (!root) return;
    toLogEnd();
    startFollowing();
    if (root.dataset.resolved !== "true") window.setTimeout(() => poll(root), POLL_MS);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();

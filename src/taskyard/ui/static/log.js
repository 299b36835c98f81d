// The log viewer: search as one types (Enter or "Find": the next matching line), and while the
// run runs, follow the live log from where the page ends, a line a row, numbered on. Without this
// script the search is a GET form the server applies (`?q=`) and a reload shows more of the log.
// Log text only ever becomes text nodes and spans with classes (task.js's AnsiConverter).
"use strict";
(() => {
  const box = document.getElementById("log-lines");
  const form = document.getElementById("log-tools");
  if (!box || !form) return;
  const input = document.getElementById("log-q");
  const said = document.getElementById("log-matches");
  const followBox = document.getElementById("log-follow-box");
  let matches = [];
  let current = -1;

  function text(line) {
    const t = line.querySelector(".t");
    return t ? t.textContent.toLowerCase() : "";
  }

  function mark(line, want) {
    line.classList.toggle("match", want !== "" && text(line).includes(want));
  }

  function search() {
    const want = input.value.toLowerCase();
    matches = [];
    for (const line of box.children) {
      mark(line, want);
      if (want && line.classList.contains("match")) matches.push(line);
    }
    current = -1;
    for (const line of box.querySelectorAll(".l.current")) line.classList.remove("current");
    said.textContent = want ? `${matches.length} line${matches.length === 1 ? "" : "s"} match${matches.length === 1 ? "es" : ""}` : "";
    const url = new URL(window.location.href);
    if (input.value) url.searchParams.set("q", input.value);
    else url.searchParams.delete("q");
    window.history.replaceState(null, "", url);
  }

  function next() {
    if (!matches.length) return;
    if (current >= 0) matches[current].classList.remove("current");
    current = (current + 1) % matches.length;
    const line = matches[current];
    line.classList.add("current");
    line.scrollIntoView({ block: "center" });
    said.textContent = `line ${line.id.slice(1)}: match ${current + 1} of ${matches.length}`;
  }

  let timer = null;
  input.addEventListener("input", () => {
    window.clearTimeout(timer);
    timer = window.setTimeout(search, 120);
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    window.clearTimeout(timer);
    if (!matches.length || input.value.toLowerCase() !== (matches.want || "")) {
      search();
      matches.want = input.value.toLowerCase();
    }
    next();
  });
  if (input.value) {
    search();
    matches.want = input.value.toLowerCase();
  }

  // Following --------------------------------------------------------------------------------
  let number = Number(box.dataset.next) || 1;
  let line = null; // the row the stream's next text goes to (null: a new one)
  if (box.dataset.open === "true" && box.lastElementChild) {
    line = box.lastElementChild; // the page ends inside a line: the stream goes on with it
  }
  const Converter = window.taskyard && window.taskyard.AnsiConverter;

  function newLine() {
    const row = document.createElement("div");
    row.className = "l";
    row.id = "L" + number;
    const link = document.createElement("a");
    link.className = "n";
    link.href = "#L" + number;
    link.textContent = String(number);
    const body = document.createElement("span");
    body.className = "t";
    row.append(link, body);
    box.append(row);
    number += 1;
    return row;
  }

  async function follow() {
    if (box.dataset.live !== "true" || !box.dataset.stream || !Converter) return;
    const url = new URL(box.dataset.stream, window.location.href);
    url.searchParams.set("start", box.dataset.bytes || "0");
    let reply;
    try {
      reply = await fetch(url, { cache: "no-store" });
    } catch {
      return;
    }
    if (!reply.ok || !reply.body) return;
    const reader = reply.body.getReader();
    const decoder = new TextDecoder("utf-8");
    const converter = new Converter();
    const want = () => input.value.toLowerCase();
    const add = (chunk) => {
      const parts = chunk.split("\n");
      parts.forEach((part, i) => {
        if (i > 0) {
          if (line) mark(line, want());
          line = null;
        }
        if (!part && i < parts.length - 1 && line === null) {
          line = newLine(); // an empty line
          return;
        }
        if (!part) return;
        if (line === null) line = newLine();
        line.querySelector(".t").append(...converter.feed(part, false));
      });
      if (followBox && followBox.checked) window.scrollTo(0, document.documentElement.scrollHeight);
    };
    for (;;) {
      let step;
      try {
        step = await reader.read();
      } catch {
        break;
      }
      if (step.done) break;
      add(decoder.decode(step.value, { stream: true }));
    }
    add(decoder.decode());
    if (line) mark(line, want());
    const live = document.getElementById("log-live");
    if (live) live.textContent = "The live log has ended: reload for the uploaded log.";
    box.dataset.live = "ended";
  }

  if (followBox) {
    followBox.addEventListener("change", () => {
      if (followBox.checked) window.scrollTo(0, document.documentElement.scrollHeight);
    });
  }
  if (!window.location.hash && followBox && followBox.checked) window.scrollTo(0, document.documentElement.scrollHeight);
  follow();
})();

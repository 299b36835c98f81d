// The task-group page: filter the rows as one types, and follow the group's live updates.
// Without this script the filter is a plain GET form the server applies, and a reload shows the truth.
"use strict";
(() => {
  const table = document.getElementById("tasks");
  const form = document.getElementById("filters");
  if (!table || !form) return;
  const select = document.getElementById("f-state");
  const input = document.getElementById("f-q");
  const shownText = document.getElementById("shown");
  const noMatch = document.getElementById("no-match");
  const notice = document.getElementById("live-notice");
  const tbody = table.tBodies[0];
  // What the server already left out: the rows here can only be narrowed further without a reload.
  const served = { state: table.dataset.state || "", q: (table.dataset.q || "").toLowerCase() };
  let total = Number(document.querySelector('[data-count="all"]').textContent) || 0;
  let shown = tbody.rows.length;
  let index = null;

  // Each row with the text the search looks in (name and taskId), built on first use.
  function rows() {
    if (index === null) {
      index = Array.from(tbody.rows, (row) => ({
        row,
        text: (row.cells[0].textContent + " " + row.id.slice(2)).toLowerCase(),
      }));
    }
    return index;
  }

  function wanted() {
    return { state: select.value, q: input.value.trim().toLowerCase() };
  }

  function keeps(entry, want) {
    return (!want.state || entry.row.dataset.state === want.state) && (!want.q || entry.text.includes(want.q));
  }

  function narrows(want) {
    return (!served.state || want.state === served.state) && (!served.q || want.q.includes(served.q));
  }

  function showCount() {
    shownText.textContent = `${shown} of ${total} tasks shown`;
    noMatch.hidden = shown > 0;
  }

  // Filter the rows on the page; false if the filter needs rows the server left out.
  function apply() {
    const want = wanted();
    if (!narrows(want)) {
      shownText.textContent = "Press Enter (or Filter) to search every task of the group";
      return false;
    }
    let n = 0;
    for (const entry of rows()) {
      const keep = keeps(entry, want);
      if (entry.row.hidden === keep) entry.row.hidden = !keep;
      if (keep) n += 1;
    }
    shown = n;
    showCount();
    const url = new URL(window.location.href);
    for (const [name, value] of [["state", want.state], ["q", input.value.trim()]]) {
      if (value) url.searchParams.set(name, value);
      else url.searchParams.delete(name);
    }
    window.history.replaceState(null, "", url);
    for (const link of document.querySelectorAll("#counts a")) {
      link.classList.toggle("current", (link.dataset.state || "") === want.state);
    }
    return true;
  }

  select.addEventListener("change", () => {
    if (!apply()) form.submit();
  });
  input.addEventListener("input", apply);
  form.addEventListener("submit", (event) => {
    if (apply()) event.preventDefault();
  });
  document.getElementById("counts").addEventListener("click", (event) => {
    const link = event.target.closest("a");
    if (!link) return;
    select.value = link.dataset.state || "";
    if (apply()) event.preventDefault();
  });

  function say(text) {
    notice.textContent = text + " ";
    const reload = document.createElement("a");
    reload.href = window.location.href;
    reload.textContent = "Reload";
    notice.append(reload);
    notice.hidden = false;
  }

  const fresh = new Set();

  function update(task) {
    const row = document.getElementById("t-" + task.taskId);
    if (!row) {
      if (task.event === "task-defined") {
        fresh.add(task.taskId);
        say(`${fresh.size} new task${fresh.size === 1 ? "" : "s"} joined the group.`);
      }
      return;
    }
    const cells = row.cells;
    row.dataset.state = task.state;
    cells[2].className = "state state-" + task.state;
    cells[2].textContent = task.state;
    cells[3].textContent = String(task.runs);
    cells[4].textContent = task.duration;
    cells[5].textContent = task.worker;
    row.classList.add("changed");
    window.setTimeout(() => row.classList.remove("changed"), 2000);
    const entry = { row, text: (cells[0].textContent + " " + task.taskId).toLowerCase() };
    const want = wanted();
    if (narrows(want)) {
      const keep = keeps(entry, want);
      if (row.hidden === keep) {
        row.hidden = !keep;
        shown += keep ? 1 : -1;
        showCount();
      }
    }
  }

  function counts(data) {
    total = data.total;
    for (const cell of document.querySelectorAll("[data-count]")) {
      const state = cell.dataset.count;
      cell.textContent = String(state === "all" ? data.total : data.counts[state] || 0);
    }
    if (narrows(wanted())) showCount();
  }

  const live = table.dataset.live;
  if (live && window.taskyard) {
    window.taskyard.follow(live, (event) => {
      let data;
      try {
        data = JSON.parse(event.data);
      } catch {
        return;
      }
      if (data.type === "task") update(data);
      else if (data.type === "counts") counts(data);
      else if (data.type === "stale") say("Some live updates were missed.");
    });
    table.dataset.following = "true";
  }
})();

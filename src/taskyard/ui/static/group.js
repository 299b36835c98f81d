// The task-group page: filter every task of the group as one types, and follow its live updates.
// Without this script the filter is a plain GET form the server applies, a page of rows at a time,
// and a reload shows the truth. With it, the page fetches every task once (`data-rows`, compact
// JSON), filters them in memory and draws only the rows it shows, a page at a time ("Show more"):
// a browser lays out 500 rows at once quickly, 10,000 slowly. The columns' links sort them in
// memory too (the server sorts them the same way without the script), and the URL keeps the
// filter and the order (`state`, `q`, `sort`), so a reload or a shared link shows the same.
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
  const more = document.getElementById("more");
  const pager = document.getElementById("pager");
  const tbody = table.tBodies[0];
  const pageRows = Number(table.dataset.pageRows) || 500;
  const startPage = Number(new URL(window.location.href).searchParams.get("page")) || 1;
  let total = Number(table.dataset.total) || 0;
  let model = null; // every task: {id, name, state, runs, duration, worker, started, ms, reason, text}
  let sort = table.dataset.sort || ""; // a column, "-" before it for descending; "": by taskId
  const STATES = ["unscheduled", "pending", "running", "completed", "failed", "exception"];
  let byId = new Map();
  let limit = pageRows * startPage;
  let asked = false; // a filter was asked for before the tasks arrived

  function wanted() {
    return { state: select.value, q: input.value.trim().toLowerCase() };
  }

  function keeps(task, want) {
    return (!want.state || task.state === want.state) && (!want.q || task.text.includes(want.q));
  }

  const proto = document.createElement("tr");
  for (const name of ["name", "id", "state", "num", "", "num", ""]) {
    const cell = document.createElement("td");
    if (name) cell.className = name;
    proto.append(cell);
  }

  function fill(row, task) {
    const cells = row.cells;
    row.dataset.state = task.state;
    cells[2].className = "state state-" + task.state;
    cells[2].textContent = task.state;
    if (task.state === "exception" && task.reason) {
      const why = document.createElement("span");
      why.className = "reason";
      why.textContent = task.reason;
      cells[2].append(" ", why);
    }
    cells[3].textContent = String(task.runs);
    cells[4].textContent = task.started;
    cells[5].textContent = task.duration;
    cells[6].textContent = task.worker;
  }

  function draw(task) {
    const row = proto.cloneNode(true);
    row.id = "t-" + task.id;
    const link = document.createElement("a");
    link.href = "/tasks/" + encodeURIComponent(task.id);
    link.textContent = task.name;
    row.cells[0].append(link);
    row.cells[1].textContent = task.id;
    fill(row, task);
    return row;
  }

  const KEYS = {
    name: (task) => task.name.toLowerCase(),
    state: (task) => { const i = STATES.indexOf(task.state); return i < 0 ? STATES.length : i; },
    started: (task) => task.started || null,
    duration: (task) => (task.ms === null || task.ms === undefined ? null : task.ms),
  };

  // As group_rows.ordered: by the column, rows without a value last either way, ties by taskId.
  function ordered(tasks) {
    if (!sort) return tasks;
    const down = sort.startsWith("-");
    const key = KEYS[sort.replace(/^-/, "")];
    if (!key) return tasks;
    const valued = [];
    const rest = [];
    for (const task of tasks) {
      const k = key(task);
      (k === null ? rest : valued).push([k, task]);
    }
    valued.sort((a, b) => (a[0] < b[0] ? (down ? 1 : -1) : a[0] > b[0] ? (down ? -1 : 1) : 0));
    return valued.map((pair) => pair[1]).concat(rest.map((pair) => pair[1]));
  }

  function headers() {
    for (const link of table.querySelectorAll("thead a.sort")) {
      const column = link.dataset.sort;
      const now = sort === column ? "ascending" : sort === "-" + column ? "descending" : "none";
      link.closest("th").setAttribute("aria-sort", now);
      const hint = link.querySelector(".visually-hidden");
      if (hint) {
        hint.textContent =
          now === "ascending" ? ", sorted ascending; sort descending"
          : now === "descending" ? ", sorted descending; sort ascending" : ": sort by it";
      }
    }
    const hidden = form.querySelector('input[name="sort"]');
    if (sort && !hidden) {
      const input = document.createElement("input");
      input.type = "hidden";
      input.name = "sort";
      form.append(input);
    }
    const field = form.querySelector('input[name="sort"]');
    if (field) field.value = sort;
  }

  function render(want) {
    const matches = ordered(model.filter((task) => keeps(task, want)));
    const shown = matches.slice(0, limit);
    const rows = document.createDocumentFragment();
    for (const task of shown) rows.append(draw(task));
    tbody.replaceChildren(rows);
    const filtered = want.state || want.q;
    shownText.textContent =
      (shown.length ? `Tasks 1 to ${shown.length} of ${matches.length}` : `No task of ${matches.length}`) +
      (filtered ? ` matching the filter (${total} in the group)` : "");
    noMatch.hidden = matches.length > 0;
    const left = matches.length - shown.length;
    more.hidden = left <= 0;
    more.textContent = `Show ${Math.min(left, pageRows)} more (${left} not shown)`;
  }

  // Filter every task; false if they have not arrived yet (the form then asks the server).
  function apply() {
    const want = wanted();
    const url = new URL(window.location.href);
    for (const [name, value] of [["state", want.state], ["q", input.value.trim()], ["sort", sort]]) {
      if (value) url.searchParams.set(name, value);
      else url.searchParams.delete(name);
    }
    url.searchParams.delete("page");
    for (const link of document.querySelectorAll("#counts a")) {
      link.classList.toggle("current", (link.dataset.state || "") === want.state);
    }
    if (model === null) {
      asked = true;
      return false;
    }
    window.history.replaceState(null, "", url);
    limit = pageRows;
    render(want);
    return true;
  }

  async function load() {
    const reply = await fetch(table.dataset.rows, { headers: { accept: "application/json" } });
    if (!reply.ok) return;
    const data = await reply.json();
    model = data.rows.map(([id, name, state, runs, duration, worker, started, ms, reason]) => ({
      id, name, state, runs, duration, worker, started: started || "", ms, reason: reason || "",
      text: (name + " " + id).toLowerCase(),
    }));
    byId = new Map(model.map((task) => [task.id, task]));
    total = model.length;
    if (pager) pager.hidden = true;
    table.dataset.instant = "true";
    if (asked) apply();
    else render(wanted());
  }

  select.addEventListener("change", () => {
    if (!apply()) form.submit();
  });
  input.addEventListener("input", apply);
  form.addEventListener("submit", (event) => {
    if (apply()) event.preventDefault();
  });
  table.tHead.addEventListener("click", (event) => {
    const link = event.target.closest("a.sort");
    if (!link || model === null) return; // not yet: the server sorts
    event.preventDefault();
    const column = link.dataset.sort;
    sort = sort === column ? "-" + column : column;
    headers();
    apply();
  });
  more.addEventListener("click", () => {
    limit += pageRows;
    render(wanted());
  });
  document.getElementById("counts").addEventListener("click", (event) => {
    const link = event.target.closest("a");
    if (!link || model === null) return;
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

  function update(data) {
    const task = byId.get(data.taskId);
    const row = document.getElementById("t-" + data.taskId);
    if (!task && !row) {
      if (data.event === "task-defined") {
        fresh.add(data.taskId);
        say(`${fresh.size} new task${fresh.size === 1 ? "" : "s"} joined the group.`);
      }
      return;
    }
    const now = {
      state: data.state, runs: data.runs, duration: data.duration, worker: data.worker,
      started: data.started || "", ms: data.durationMs, reason: data.reason || "",
    };
    if (task) Object.assign(task, now);
    if (!row) return;
    fill(row, now);
    row.classList.add("changed");
    window.setTimeout(() => row.classList.remove("changed"), 2000);
    const want = wanted();
    if (want.state && want.state !== data.state) row.hidden = true; // left the filter: redraw shows it gone
  }

  function counts(data) {
    total = data.total;
    for (const cell of document.querySelectorAll("[data-count]")) {
      const state = cell.dataset.count;
      cell.textContent = String(state === "all" ? data.total : data.counts[state] || 0);
    }
  }

  load().catch(() => {}); // without the tasks, the form still asks the server
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
  }
})();

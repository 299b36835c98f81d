// Live pages (the dashboard, a task queue): every ~2 s, each element marked `data-live` is
// replaced by its copy from a fresh fetch of the page; nothing is fetched while the tab is hidden.
"use strict";
(function () {
  const PERIOD_MS = 2000;
  let timer = null;

  async function refreshAll() {
    timer = null;
    if (document.hidden) return;
    const url = location.pathname + location.search;
    for (const element of document.querySelectorAll("[data-live][id]")) {
      try {
        await window.taskyard.refresh(url, element.id);
      } catch (error) {
        // The server is away for a moment: try again at the next tick.
      }
    }
    schedule();
  }

  function schedule() {
    if (timer === null && !document.hidden) timer = setTimeout(refreshAll, PERIOD_MS);
  }

  document.addEventListener("visibilitychange", () => {
    if (document.hidden) {
      clearTimeout(timer);
      timer = null;
    } else {
      schedule();
    }
  });
  schedule();
})();

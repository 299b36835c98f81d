// taskyard's UI: what every page shares. Pages work without this script; it only adds live updates.
"use strict";
window.taskyard = {
  // Follow server-sent events at `url`, calling `onMessage(event)` for each; reconnects by itself.
  follow(url, onMessage) {
    if (!window.EventSource) return null;
    const source = new EventSource(url);
    source.onmessage = onMessage;
    return source;
  },
  // Replace the element `id`'s content with the same element's from a fresh copy of `url`.
  async refresh(url, id) {
    const reply = await fetch(url, { headers: { accept: "text/html" } });
    if (!reply.ok) return;
    const fresh = new DOMParser().parseFromString(await reply.text(), "text/html").getElementById(id);
    const here = document.getElementById(id);
    if (fresh && here) here.replaceWith(fresh);
  },
};

"""The web UI, served by `taskyard serve` at `/`: server-rendered pages (Jinja2, escaped
everywhere), a small stylesheet and script, live updates where JavaScript is on. Every page shows
the truth on a reload with JavaScript off. See docs/ui.md."""

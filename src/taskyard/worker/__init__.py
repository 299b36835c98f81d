"""taskyard worker: claims tasks, runs their commands, uploads logs and artifacts, reports."""

-- Live logs of running tasks, appended by the worker while the task runs and streamed by the API.
-- One head row per run (one live log a run); its text is kept as the chunks the worker sent,
-- each keyed by the byte offset (in UTF-8) where it starts. `length` is the total in bytes.
CREATE TABLE live_logs (
    task_id  TEXT NOT NULL,
    run_id   INTEGER NOT NULL,
    name     TEXT NOT NULL,
    length   BIGINT NOT NULL,
    closed   BOOLEAN NOT NULL,
    expires  BIGINT NOT NULL,
    PRIMARY KEY (task_id, run_id)
);
CREATE INDEX live_logs_expires ON live_logs (expires);

CREATE TABLE live_log_chunks (
    task_id      TEXT NOT NULL,
    run_id       INTEGER NOT NULL,
    byte_offset  BIGINT NOT NULL,
    data         TEXT NOT NULL,
    PRIMARY KEY (task_id, run_id, byte_offset)
);

-- Artifacts of task runs, keyed by (task_id, run_id, name). `details` is JSON text: the
-- reference URL, the link target, the error reason and message, or the s3 contentLength.
CREATE TABLE artifacts (
    task_id       TEXT NOT NULL,
    run_id        INTEGER NOT NULL,
    name          TEXT NOT NULL,
    storage_type  TEXT NOT NULL,
    content_type  TEXT NOT NULL,
    expires       BIGINT NOT NULL,
    details       TEXT NOT NULL,
    present       BOOLEAN NOT NULL,
    PRIMARY KEY (task_id, run_id, name)
);
CREATE INDEX artifacts_expires ON artifacts (expires);

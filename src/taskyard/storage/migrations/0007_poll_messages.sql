-- The poll protocol's messages: one per run that became pending, on the queue of its task queue
-- and priority (`queue_name`), served through taskyard's Azure-queue endpoint. A message is
-- invisible until `visible`, gone once deleted, and expires with its task's deadline.
CREATE TABLE poll_messages (
    message_id     TEXT PRIMARY KEY,
    queue_name     TEXT NOT NULL,
    task_id        TEXT NOT NULL,
    run_id         INTEGER NOT NULL,
    inserted       BIGINT NOT NULL,
    expires        BIGINT NOT NULL,
    visible        BIGINT NOT NULL,
    pop_receipt    TEXT,
    dequeue_count  INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX poll_messages_order ON poll_messages (queue_name, visible, inserted);
CREATE INDEX poll_messages_expires ON poll_messages (expires);

-- The notify service (src/taskyard/notify/).
-- How far the notifier has read the event log: every task event up to `through` has had its
-- `notify.` routes recorded in notify_deliveries. Moved in the transaction that records them.
CREATE TABLE notify_cursor (
    through  BIGINT NOT NULL
);
INSERT INTO notify_cursor (through) VALUES (0);

-- One notification a task route asks for, keyed by (event log id, route): the dedup key, so an
-- event's route is recorded once. `outcome` is `pending` until it is sent (`sent`), refused
-- (`refused`: a transport taskyard has not, or a bad address), suppressed (`suppressed`: the
-- denylist) or given up after its attempts (`failed`); a pending one is retried from `next_try`.
-- Instants are epoch ms.
CREATE TABLE notify_deliveries (
    event_id  BIGINT NOT NULL,
    route     TEXT NOT NULL,
    task_id   TEXT NOT NULL,
    status    TEXT NOT NULL,
    outcome   TEXT NOT NULL,
    detail    TEXT NOT NULL,
    attempts  INTEGER NOT NULL,
    next_try  BIGINT NOT NULL,
    created   BIGINT NOT NULL,
    PRIMARY KEY (event_id, route)
);
CREATE INDEX notify_deliveries_due ON notify_deliveries (outcome, next_try);
CREATE INDEX notify_deliveries_created ON notify_deliveries (created);

-- Addresses no notification goes to (addDenylistAddress), by notification type.
CREATE TABLE notify_denylist (
    notification_type     TEXT NOT NULL,
    notification_address  TEXT NOT NULL,
    PRIMARY KEY (notification_type, notification_address)
);

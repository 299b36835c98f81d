-- The Hawk-signed requests that changed something (src/taskyard/storage/port.py, Replays): each
-- one's MAC, inserted in the same transaction as the request's own writes, so that a replay is
-- refused after a restart and by every process sharing the database. `expires` is epoch ms: the
-- request's timestamp plus the 15 minutes of clock skew Hawk allows, after which the timestamp
-- check refuses a replay by itself and the expiry sweep deletes the row.
CREATE TABLE seen_requests (
    mac      TEXT PRIMARY KEY,
    expires  BIGINT NOT NULL
);
CREATE INDEX seen_requests_expires ON seen_requests (expires);

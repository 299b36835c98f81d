-- The Hawk-signed requests that wrote (src/taskyard/storage/port.py, Replays): each one's MAC,
-- inserted in the same transaction as the request's own writes, so that a replay is refused after
-- a restart and by every process sharing the database. `expires` is epoch ms: the request's
-- timestamp plus the 15 minutes of clock skew Hawk allows, after which the timestamp check refuses
-- a replay by itself and the expiry sweep deletes the row.
--
-- The key is (expires, mac): a replay carries the very timestamp its MAC signs, so it meets the
-- same key (the constraint `seen_requests_pkey` tells a replay from any other conflict). Led by
-- the time, the index is written at its right edge and swept from its left, and needs no second
-- one. The table is small and changes all the time: vacuum it after a few thousand changes.
CREATE TABLE seen_requests (
    expires  BIGINT NOT NULL,
    mac      TEXT NOT NULL,
    PRIMARY KEY (expires, mac)
);
ALTER TABLE seen_requests SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000,
                               autovacuum_vacuum_cost_delay = 0);

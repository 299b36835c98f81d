-- The Hawk-signed requests that wrote (src/taskyard/storage/port.py, Replays): each one's MAC,
-- inserted in the same transaction as the request's own writes, so that a replay is refused after
-- a restart and by every process sharing the database. `expires` is epoch ms: the request's
-- timestamp plus the 15 minutes of clock skew Hawk allows, after which the timestamp check refuses
-- a replay by itself and the expiry sweep deletes the row.
--
-- The key is (expires, mac): a replay carries the very timestamp its MAC signs, so it meets the
-- same key. Led by the time, the one b-tree is written at its right edge and swept from its left,
-- and needs no second index (WITHOUT ROWID: no rowid b-tree either): an insert dirties one page.
CREATE TABLE seen_requests (
    expires  BIGINT NOT NULL,
    mac      TEXT NOT NULL,
    PRIMARY KEY (expires, mac)
) WITHOUT ROWID;

-- The outbox becomes the event log's store: an event's row is written once, by the change that
-- made it, and kept until the log's retention prunes it. The relay no longer deletes what it
-- published and writes it again into `event_log`; it appends only the event's id there.
--
-- Which events are published is told by transaction ids and snapshots, as no column could be
-- without rewriting each row: every row records the transaction that wrote it (`xid`), and
-- `outbox_relayed.done` is a snapshot whose visible rows are all published. The relay publishes
-- a window at a time: the rows visible in a newer snapshot (`window_end`) but not in `done`, in
-- order of (xid, id), a page per transaction (the cursor `after_xid`, `after_id`); once the
-- window is through, `done` moves to its end. A transaction that commits late is seen by a later
-- window, never skipped: a snapshot tells exactly which transactions had committed.
ALTER TABLE outbox ADD COLUMN xid xid8 NOT NULL DEFAULT '3';
ALTER TABLE outbox ALTER COLUMN xid SET DEFAULT pg_current_xact_id();
CREATE INDEX outbox_by_xid ON outbox (xid, id);
CREATE TABLE outbox_relayed (
    done        pg_snapshot NOT NULL,
    window_end  pg_snapshot,
    after_xid   xid8 NOT NULL,
    after_id    BIGINT NOT NULL
);
-- Rows already in the outbox are unpublished: xid 3, not visible in the snapshot '3:3:'. The
-- published events the log kept move into the outbox under their log ids negated, with xid 2,
-- which that snapshot shows: published.
INSERT INTO outbox_relayed (done, window_end, after_xid, after_id) VALUES ('3:3:', NULL, '0', 0);
INSERT INTO outbox (id, exchange, routing_key, cc, body, created, xid)
SELECT -id, exchange, routing_key, cc, body, published, '2' FROM event_log;
ALTER TABLE event_log ADD COLUMN event BIGINT;
UPDATE event_log SET event = -id;
ALTER TABLE event_log ALTER COLUMN event SET NOT NULL,
    DROP COLUMN exchange, DROP COLUMN routing_key, DROP COLUMN cc, DROP COLUMN body;
-- The events not published yet: the metrics' outbox depth, the consistency check. Those `done`
-- does not show are the rows of the transactions it saw running (its xip list) and those from
-- its xmax on (not all from its xmin: a transaction left open would make that everything since).
CREATE VIEW unpublished_events AS
SELECT o.id, o.exchange, o.routing_key, o.cc, o.body, o.created
  FROM (SELECT * FROM outbox_relayed LIMIT 1) AS r
 CROSS JOIN LATERAL (
    SELECT * FROM outbox WHERE xid = ANY(ARRAY(SELECT pg_snapshot_xip(r.done)))
    UNION ALL
    SELECT * FROM outbox WHERE xid >= pg_snapshot_xmax(r.done)
 ) AS o
 WHERE NOT (r.window_end IS NOT NULL AND pg_visible_in_snapshot(o.xid, r.window_end)
            AND (o.xid, o.id) <= (r.after_xid, r.after_id));

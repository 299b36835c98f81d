-- The outbox becomes the event log's store: an event's row is written once, by the change that
-- made it, and kept until the log's retention prunes it. The relay no longer deletes what it
-- published and writes it again into `event_log`; it appends only the event's id there.
--
-- SQLite has one writer at a time, so the outbox's ids grow in commit order: every event up to
-- `outbox_relayed.through_id` is published, every later one is not.
CREATE TABLE outbox_relayed (
    through_id  INTEGER NOT NULL
);
INSERT INTO outbox_relayed (through_id) VALUES (0);
-- The published events the log kept move into the outbox under their log ids negated: below
-- every id the outbox gives, so published.
INSERT INTO outbox (id, exchange, routing_key, cc, body, created)
SELECT -id, exchange, routing_key, cc, body, published FROM event_log;
ALTER TABLE event_log ADD COLUMN event INTEGER NOT NULL DEFAULT 0;
UPDATE event_log SET event = -id;
ALTER TABLE event_log DROP COLUMN exchange;
ALTER TABLE event_log DROP COLUMN routing_key;
ALTER TABLE event_log DROP COLUMN cc;
ALTER TABLE event_log DROP COLUMN body;
-- The events not published yet: the metrics' outbox depth, the consistency check.
CREATE VIEW unpublished_events AS
SELECT o.id, o.exchange, o.routing_key, o.cc, o.body, o.created
  FROM outbox o, outbox_relayed r
 WHERE o.id > r.through_id;

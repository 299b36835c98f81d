-- Events the relay has published, kept a while for the HTTP event stream: a client that
-- reconnects with the last id it saw is sent what came after it. `id` counts in the order the
-- relay published (only one relay publishes at a time), so a reader that follows `id > last`
-- misses nothing. Rows older than the retention window are pruned; `event_log_pruned.through`
-- is the highest id pruned so far, which tells a client that asks for older ones what it missed.
CREATE TABLE event_log (
    id           {{BIGSERIAL}},
    published    BIGINT NOT NULL,
    exchange     TEXT NOT NULL,
    routing_key  TEXT NOT NULL,
    cc           TEXT NOT NULL,
    body         TEXT NOT NULL
);

CREATE TABLE event_log_pruned (
    through  BIGINT NOT NULL
);
INSERT INTO event_log_pruned (through) VALUES (0);

-- The event log is a FIFO table like the outbox: appended by every relay batch, pruned from the
-- old end. Vacuum it after a few thousand changes rather than at the default thresholds.
ALTER TABLE event_log SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000,
                           autovacuum_vacuum_cost_delay = 0);

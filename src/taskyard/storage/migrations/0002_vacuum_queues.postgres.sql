-- The claim index, the outbox and the resolution queue are FIFO tables: rows come and go
-- hundreds of times a second. Left to the default thresholds, dead rows pile up and every
-- claim scans them; vacuum these tables after a few hundred changes instead.
ALTER TABLE pending_runs SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 500,
                              autovacuum_vacuum_cost_delay = 0, autovacuum_analyze_scale_factor = 0.05);
ALTER TABLE outbox SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 500,
                        autovacuum_vacuum_cost_delay = 0);
ALTER TABLE task_resolutions SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 500,
                                  autovacuum_vacuum_cost_delay = 0);
-- Leave room in each page so a task's updates can stay on its page.
ALTER TABLE tasks SET (fillfactor = 80);

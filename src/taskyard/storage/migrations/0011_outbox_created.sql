-- When each event was written (epoch ms), for the relay's lag in /metrics. Rows written by an
-- older taskyard have none.
ALTER TABLE outbox ADD COLUMN created BIGINT;

-- PostgreSQL's own forms: row locks, SKIP LOCKED claims, array parameters.

-- name: get_task_for_update
SELECT * FROM tasks WHERE task_id = $1 FOR UPDATE

-- name: get_tasks
SELECT * FROM tasks WHERE task_id = ANY($1::text[]) ORDER BY task_id

-- name: lock_required_tasks
SELECT task_id, state, expires FROM tasks WHERE task_id = ANY($1::text[]) FOR SHARE

-- name: lock_pending
-- The first claimable runs with their task rows, both locked; a run whose pending row or task row
-- another transaction holds (a claim, a cancel, a priority change) is skipped, never waited for.
SELECT t.*, p.run_id AS pending_run_id, p.priority AS pending_priority, p.inserted AS pending_inserted
  FROM pending_runs p JOIN tasks t ON t.task_id = p.task_id
 WHERE p.task_queue_id = $1 AND p.deadline > $3
 ORDER BY p.priority DESC, p.inserted, p.task_id
 LIMIT $2
   FOR UPDATE OF p, t SKIP LOCKED

-- name: take_resolutions
SELECT id, task_id, task_group_id, resolution FROM task_resolutions
 ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED

-- name: try_advisory_xact_lock
SELECT pg_try_advisory_xact_lock($1)

-- name: delete_events
-- By id, never by range: a lower id may commit after a higher one was read.
DELETE FROM outbox WHERE id = ANY($1::bigint[])

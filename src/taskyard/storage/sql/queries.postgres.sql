-- PostgreSQL's own forms: row locks, SKIP LOCKED claims, array parameters.

-- name: get_task_for_update
SELECT * FROM tasks WHERE task_id = $1 FOR UPDATE

-- name: get_tasks
SELECT * FROM tasks WHERE task_id = ANY($1::text[]) ORDER BY task_id

-- name: lock_required_tasks
SELECT task_id, state, expires FROM tasks WHERE task_id = ANY($1::text[]) FOR SHARE

-- name: take_pending
DELETE FROM pending_runs
 WHERE (task_id, run_id) IN (
       SELECT task_id, run_id FROM pending_runs
        WHERE task_queue_id = $1 AND deadline > $3
        ORDER BY priority DESC, inserted, task_id
        LIMIT $2
          FOR UPDATE SKIP LOCKED)
RETURNING task_id, run_id, priority, inserted

-- name: take_resolutions
SELECT id, task_id, task_group_id, resolution FROM task_resolutions
 ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED

-- name: try_advisory_xact_lock
SELECT pg_try_advisory_xact_lock($1)

-- name: delete_events
-- By id, never by range: a lower id may commit after a higher one was read.
DELETE FROM outbox WHERE id = ANY($1::bigint[])

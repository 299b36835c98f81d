-- SQLite's own forms. Writers are serialised by BEGIN IMMEDIATE, so no row locks are needed.

-- name: get_task_for_update
SELECT * FROM tasks WHERE task_id = $1

-- name: get_tasks
SELECT * FROM tasks WHERE task_id IN (SELECT value FROM json_each($1)) ORDER BY task_id

-- name: lock_required_tasks
SELECT task_id, state, expires FROM tasks WHERE task_id IN (SELECT value FROM json_each($1))

-- name: take_pending
DELETE FROM pending_runs
 WHERE rowid IN (
       SELECT rowid FROM pending_runs
        WHERE task_queue_id = $1 AND deadline > $3
        ORDER BY priority DESC, inserted, task_id
        LIMIT $2)
RETURNING task_id, run_id, priority, inserted

-- name: take_resolutions
SELECT id, task_id, task_group_id, resolution FROM task_resolutions ORDER BY id LIMIT $1

-- name: delete_events
-- By id, never by range: a lower id may commit after a higher one was read.
DELETE FROM outbox WHERE id IN (SELECT value FROM json_each($1))

-- SQLite's own forms. Writers are serialised by BEGIN IMMEDIATE, so no row locks are needed.

-- name: get_task_for_update
SELECT * FROM tasks WHERE task_id = $1

-- name: get_tasks
SELECT * FROM tasks WHERE task_id IN (SELECT value FROM json_each($1)) ORDER BY task_id

-- name: lock_required_tasks
SELECT task_id, state, expires FROM tasks WHERE task_id IN (SELECT value FROM json_each($1))

-- name: lock_pending
SELECT t.*, p.run_id AS pending_run_id, p.priority AS pending_priority, p.inserted AS pending_inserted
  FROM pending_runs p JOIN tasks t ON t.task_id = p.task_id
 WHERE p.task_queue_id = $1 AND p.deadline > $3
 ORDER BY p.priority DESC, p.inserted, p.task_id
 LIMIT $2

-- name: take_resolutions
SELECT id, task_id, task_group_id, resolution FROM task_resolutions ORDER BY id LIMIT $1

-- name: delete_events
-- By id, never by range: a lower id may commit after a higher one was read.
DELETE FROM outbox WHERE id IN (SELECT value FROM json_each($1))

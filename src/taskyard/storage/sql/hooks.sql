-- The hooks service's queries (src/taskyard/hooks/).

-- name: _hook_columns
hook_group_id, hook_id, metadata, task, schedule, bindings, trigger_schema, trigger_token,
       next_task_id, next_scheduled_date

-- name: list_hook_groups
SELECT DISTINCT hook_group_id FROM hooks ORDER BY hook_group_id

-- name: list_hooks_in_group
SELECT {{_hook_columns}} FROM hooks WHERE hook_group_id = $1 ORDER BY hook_id

-- name: get_hook
SELECT {{_hook_columns}} FROM hooks WHERE hook_group_id = $1 AND hook_id = $2

-- name: lock_hook
SELECT {{_hook_columns}} FROM hooks WHERE hook_group_id = $1 AND hook_id = $2 {{for_update}}

-- name: insert_hook
INSERT INTO hooks (hook_group_id, hook_id, metadata, task, schedule, bindings, trigger_schema,
                   trigger_token, next_task_id, next_scheduled_date, created, last_modified)
VALUES (:hook_group_id, :hook_id, :metadata, :task, :schedule, :bindings, :trigger_schema,
        :trigger_token, :next_task_id, :next_scheduled_date, :now, :now)
ON CONFLICT (hook_group_id, hook_id) DO NOTHING

-- name: update_hook
UPDATE hooks
   SET metadata = :metadata, task = :task, schedule = :schedule, bindings = :bindings,
       trigger_schema = :trigger_schema, next_task_id = :next_task_id,
       next_scheduled_date = :next_scheduled_date, last_modified = :now
 WHERE hook_group_id = :hook_group_id AND hook_id = :hook_id

-- name: delete_hook
DELETE FROM hooks WHERE hook_group_id = $1 AND hook_id = $2

-- name: delete_hook_fires
DELETE FROM hook_last_fires WHERE hook_group_id = $1 AND hook_id = $2

-- name: set_trigger_token
UPDATE hooks SET trigger_token = $3 WHERE hook_group_id = $1 AND hook_id = $2

-- Hooks whose scheduled fire is due, earliest first.
-- name: due_hooks
SELECT {{_hook_columns}} FROM hooks
 WHERE next_scheduled_date <= $1
 ORDER BY next_scheduled_date, hook_group_id, hook_id
 LIMIT $2

-- name: next_scheduled_date
SELECT MIN(next_scheduled_date) FROM hooks

-- The next scheduled fire, only if the one just done is still the hook's next (a racing update
-- chose another, which stands).
-- name: advance_hook_schedule
UPDATE hooks SET next_task_id = $4, next_scheduled_date = $5
 WHERE hook_group_id = $1 AND hook_id = $2 AND next_task_id = $3

-- name: hooks_with_bindings
SELECT {{_hook_columns}} FROM hooks WHERE bindings <> '[]' ORDER BY hook_group_id, hook_id

-- name: insert_last_fire
INSERT INTO hook_last_fires (hook_group_id, hook_id, task_id, fired_by, task_create_time, result, error)
VALUES (:hook_group_id, :hook_id, :task_id, :fired_by, :task_create_time, :result, :error)
ON CONFLICT (hook_group_id, hook_id, task_id) DO UPDATE
   SET fired_by = excluded.fired_by, task_create_time = excluded.task_create_time,
       result = excluded.result, error = excluded.error

-- name: list_last_fires
-- Newest first; the page after the key ($3, $4) of the last row shown.
SELECT f.hook_group_id, f.hook_id, f.task_id, f.fired_by, f.task_create_time, f.result, f.error,
       t.state AS task_state
  FROM hook_last_fires f LEFT JOIN tasks t ON t.task_id = f.task_id
 WHERE f.hook_group_id = $1 AND f.hook_id = $2
   AND (f.task_create_time < $3 OR (f.task_create_time = $3 AND f.task_id < $4))
 ORDER BY f.task_create_time DESC, f.task_id DESC
 LIMIT $5

-- name: last_fire
SELECT task_id, task_create_time, result, error FROM hook_last_fires
 WHERE hook_group_id = $1 AND hook_id = $2
 ORDER BY task_create_time DESC, task_id DESC
 LIMIT 1

-- name: expire_last_fires
DELETE FROM hook_last_fires
 WHERE task_create_time < $1
   AND task_id IN (SELECT task_id FROM hook_last_fires WHERE task_create_time < $1 LIMIT $2)

-- Hooks whose trigger token the given key sealed (`<key id>:<sealed>`).
-- name: hooks_sealed_with
SELECT hook_group_id, hook_id, trigger_token FROM hooks
 WHERE substr(trigger_token, 1, length($1) + 1) = $1 || ':' ORDER BY hook_group_id, hook_id LIMIT $2

-- Only if the token is still the one read: a reset meanwhile sealed a new one, under the new key.
-- name: reseal_trigger_token
UPDATE hooks SET trigger_token = $4 WHERE hook_group_id = $1 AND hook_id = $2 AND trigger_token = $3

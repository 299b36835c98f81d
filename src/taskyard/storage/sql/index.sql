-- The index service's queries (index/).

-- name: find_indexed_task
-- The entry at (namespace $1, name $2), unless it expired before $3.
SELECT task_id, rank, data, expires FROM indexed_tasks WHERE namespace = $1 AND name = $2 AND expires > $3

-- name: get_indexed_task
-- The entry at (namespace $1, name $2), expired or not.
SELECT task_id, rank, data, expires FROM indexed_tasks WHERE namespace = $1 AND name = $2

-- name: upsert_indexed_task
-- Store the entry unless one of a higher rank is there (and has not expired at :now): an equal
-- rank replaces it. Answers 1 when it wrote, 0 when the stored entry stays.
INSERT INTO indexed_tasks (namespace, name, rank, task_id, data, expires)
VALUES (:namespace, :entry_name, :rank, :task_id, :data, :expires)
ON CONFLICT (namespace, name) DO UPDATE
   SET rank = excluded.rank, task_id = excluded.task_id, data = excluded.data, expires = excluded.expires
 WHERE indexed_tasks.rank <= excluded.rank OR indexed_tasks.expires <= :now

-- name: ensure_index_namespace
-- The namespace (parent $1, name $2), expiring no sooner than $3 (an expiry is never lowered).
INSERT INTO index_namespaces (parent, name, expires) VALUES ($1, $2, $3)
ON CONFLICT (parent, name) DO UPDATE SET expires = excluded.expires
 WHERE index_namespaces.expires < excluded.expires

-- name: delete_indexed_task
DELETE FROM indexed_tasks WHERE namespace = $1 AND name = $2

-- name: list_index_namespaces
-- The namespaces directly under $1 whose name comes after $2, unexpired at $3, by name; at most $4.
SELECT name, expires FROM index_namespaces
 WHERE parent = $1 AND name > $2 AND expires > $3
 ORDER BY name LIMIT $4

-- name: list_indexed_tasks
-- The entries directly in namespace $1 whose name comes after $2, unexpired at $3, by name; at most $4.
SELECT name, task_id, rank, data, expires FROM indexed_tasks
 WHERE namespace = $1 AND name > $2 AND expires > $3
 ORDER BY name LIMIT $4

-- name: expire_indexed_tasks
-- Up to $2 entries that expired before $1.
DELETE FROM indexed_tasks WHERE (namespace, name) IN
    (SELECT namespace, name FROM indexed_tasks WHERE expires < $1 LIMIT $2)

-- name: expire_index_namespaces
-- Up to $2 namespaces that expired before $1.
DELETE FROM index_namespaces WHERE (parent, name) IN
    (SELECT parent, name FROM index_namespaces WHERE expires < $1 LIMIT $2)

-- name: index_cursor
-- How far the indexer has read the event log, locked: one indexer at a time across the deployment
-- (on PostgreSQL; the others wait, then read where it left).
SELECT through FROM index_cursor {{for_update}}

-- name: move_index_cursor
UPDATE index_cursor SET through = $1

-- name: completed_index_events
-- The task-completed events CC'd to an `index.` route, logged after id $1 up to id $2, in log
-- order; at most $3.
SELECT l.id, o.body, o.cc FROM event_log l JOIN outbox o ON o.id = l.event
 WHERE l.id > $1 AND l.id <= $2 AND o.exchange = 'task-completed' AND o.cc LIKE '%"route.index.%'
 ORDER BY l.id LIMIT $3

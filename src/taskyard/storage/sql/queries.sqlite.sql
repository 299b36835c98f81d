-- SQLite's own forms of the queries whose shape differs from PostgreSQL's. Where only a word or two
-- differ (a row lock, a list parameter, a cast), the query is written once in queries.sql with the
-- dialect words of storage/_queries.py. Each query here says why it differs (`-- differs:`).

-- name: update_tasks
-- update_task_checked for many tasks in one statement: $1 is a JSON list of objects holding its
-- parameters. Answers the taskIds written: a row whose version moved is left as it is.
-- differs: rows from a JSON list: PostgreSQL's json_to_recordset types each column, SQLite reads
-- them from json_each.
UPDATE tasks
   SET runs = v.runs, state = v.state, retries_left = v.retries_left, taken_until = v.taken_until,
       claimed_at = v.claimed_at, ever_resolved = v.ever_resolved, priority = v.priority,
       version = v.version
  FROM (SELECT value ->> 'task_id' AS task_id, value ->> 'old_version' AS old_version,
               value ->> 'runs' AS runs, value ->> 'state' AS state,
               value ->> 'retries_left' AS retries_left, value ->> 'taken_until' AS taken_until,
               value ->> 'claimed_at' AS claimed_at, value ->> 'ever_resolved' AS ever_resolved,
               value ->> 'priority' AS priority, value ->> 'version' AS version
          FROM json_each($1)) AS v
 WHERE tasks.task_id = v.task_id AND tasks.version = v.old_version
RETURNING task_id

-- name: insert_pending_runs
-- insert_pending for many runs: $1 is a JSON list of objects holding its parameters.
-- differs: rows from a JSON list: PostgreSQL's json_to_recordset types each column, SQLite reads
-- them from json_each.
INSERT INTO pending_runs (task_id, run_id, task_queue_id, priority, inserted, deadline)
SELECT value ->> 'task_id', value ->> 'run_id', value ->> 'task_queue_id', value ->> 'priority',
       value ->> 'inserted', value ->> 'deadline'
  FROM json_each($1) WHERE TRUE
ON CONFLICT (task_id, run_id) DO NOTHING

-- name: insert_poll_messages
-- insert_poll_message for many runs: $1 is a JSON list of objects holding its parameters.
-- differs: rows from a JSON list: PostgreSQL's json_to_recordset types each column, SQLite reads
-- them from json_each.
INSERT INTO poll_messages (message_id, queue_name, task_id, run_id, inserted, expires, visible, dequeue_count)
SELECT value ->> 'message_id', value ->> 'queue_name', value ->> 'task_id', value ->> 'run_id',
       value ->> 'inserted', value ->> 'expires', value ->> 'inserted', 0
  FROM json_each($1)

-- name: log_events
-- The events (outbox ids, the JSON list $2) the relay published at $1, in that order: their log ids
-- count in it, and are answered (the newest goes with the relay's notification).
-- differs: a JSON list's elements in order: json_each's key here, WITH ORDINALITY and casts on
-- PostgreSQL.
INSERT INTO event_log (published, event) SELECT $1, value FROM json_each($2) ORDER BY key
RETURNING id

-- name: insert_events
-- insert_event for many events, in the order of the JSON list $1 of [exchange, routing_key, cc,
-- body]; $2 is when.
-- differs: a JSON list's elements in order: json_each's key here, WITH ORDINALITY and casts on
-- PostgreSQL.
INSERT INTO outbox (exchange, routing_key, cc, body, created)
SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, $2 FROM json_each($1) ORDER BY key

-- name: take_pending
-- Take the first claimable runs for a worker that is not quarantined: delete their claim-index
-- rows, answering each with its task row and the worker's own (its columns as worker_*, NULL for a
-- worker never seen; RETURNING reads only the deleted table: the other columns come one subquery
-- each). In no particular order: the caller sorts by pending_priority, pending_inserted, task_id.
-- A quarantined worker takes nothing.
-- differs: one DELETE ... RETURNING, a subquery per column (RETURNING reads only the deleted
-- table); PostgreSQL's CTEs skip locked rows.
DELETE FROM pending_runs
 WHERE (task_id, run_id) IN (SELECT p.task_id, p.run_id FROM pending_runs p JOIN tasks t ON t.task_id = p.task_id
                              WHERE p.task_queue_id = :task_queue_id AND p.deadline > :now
                                AND NOT EXISTS (SELECT 1 FROM workers w
                                                 WHERE w.task_queue_id = :task_queue_id
                                                   AND w.worker_group = :worker_group
                                                   AND w.worker_id = :worker_id
                                                   AND w.quarantine_until > :now)
                              ORDER BY p.priority DESC, p.inserted, p.task_id
                              LIMIT :count)
RETURNING run_id AS pending_run_id, priority AS pending_priority, inserted AS pending_inserted,
       (SELECT task_id FROM tasks t WHERE t.task_id = pending_runs.task_id) AS task_id,
       (SELECT task_group_id FROM tasks t WHERE t.task_id = pending_runs.task_id) AS task_group_id,
       (SELECT scheduler_id FROM tasks t WHERE t.task_id = pending_runs.task_id) AS scheduler_id,
       (SELECT project_id FROM tasks t WHERE t.task_id = pending_runs.task_id) AS project_id,
       (SELECT task_queue_id FROM tasks t WHERE t.task_id = pending_runs.task_id) AS task_queue_id,
       (SELECT priority FROM tasks t WHERE t.task_id = pending_runs.task_id) AS priority,
       (SELECT requires FROM tasks t WHERE t.task_id = pending_runs.task_id) AS requires,
       (SELECT retries_left FROM tasks t WHERE t.task_id = pending_runs.task_id) AS retries_left,
       (SELECT created FROM tasks t WHERE t.task_id = pending_runs.task_id) AS created,
       (SELECT deadline FROM tasks t WHERE t.task_id = pending_runs.task_id) AS deadline,
       (SELECT expires FROM tasks t WHERE t.task_id = pending_runs.task_id) AS expires,
       (SELECT definition FROM tasks t WHERE t.task_id = pending_runs.task_id) AS definition,
       (SELECT runs FROM tasks t WHERE t.task_id = pending_runs.task_id) AS runs,
       (SELECT state FROM tasks t WHERE t.task_id = pending_runs.task_id) AS state,
       (SELECT taken_until FROM tasks t WHERE t.task_id = pending_runs.task_id) AS taken_until,
       (SELECT claimed_at FROM tasks t WHERE t.task_id = pending_runs.task_id) AS claimed_at,
       (SELECT ever_resolved FROM tasks t WHERE t.task_id = pending_runs.task_id) AS ever_resolved,
       (SELECT version FROM tasks t WHERE t.task_id = pending_runs.task_id) AS version,
       (SELECT first_claim FROM workers w WHERE w.task_queue_id = :task_queue_id AND w.worker_group = :worker_group
           AND w.worker_id = :worker_id) AS worker_first_claim,
       (SELECT expires FROM workers w WHERE w.task_queue_id = :task_queue_id AND w.worker_group = :worker_group
           AND w.worker_id = :worker_id) AS worker_expires,
       (SELECT quarantine_until FROM workers w WHERE w.task_queue_id = :task_queue_id AND w.worker_group = :worker_group
           AND w.worker_id = :worker_id) AS worker_quarantine_until,
       (SELECT quarantine_details FROM workers w WHERE w.task_queue_id = :task_queue_id AND w.worker_group = :worker_group
           AND w.worker_id = :worker_id) AS worker_quarantine_details,
       (SELECT recent_tasks FROM workers w WHERE w.task_queue_id = :task_queue_id AND w.worker_group = :worker_group
           AND w.worker_id = :worker_id) AS worker_recent_tasks

-- name: lock_relay
-- BEGIN IMMEDIATE already makes the relay the only writer: nothing to lock.
-- differs: BEGIN IMMEDIATE already makes the relay the only writer; PostgreSQL takes an advisory
-- lock.
SELECT $1 WHERE FALSE

-- name: take_events
-- The next $1 events to publish: one writer at a time, so ids grow in commit order. No windows
-- here (PostgreSQL's): xid and window_end are NULL.
-- differs: ids grow in commit order here; PostgreSQL reads by snapshot windows (migration 0013).
SELECT id, NULL AS xid, NULL AS window_end, exchange, routing_key, cc, body FROM outbox
 WHERE id > (SELECT through_id FROM outbox_relayed)
 ORDER BY id LIMIT $1

-- name: relayed
-- The relay published every event up to id $3 ($1, $2 and $4 are PostgreSQL's windows).
-- differs: a cursor of ids here; PostgreSQL's snapshot windows (migration 0013).
UPDATE outbox_relayed SET through_id = $3 WHERE $1 IS $1 AND $2 IS $2 AND $4 IS $4

-- name: _join_group
-- join_group's and join_group_checked's upsert of the group, which each ends in its own way.
-- differs: one upsert here; PostgreSQL only locks a live group FOR SHARE (a CTE); a checked write
-- fails by a division by zero.
INSERT INTO task_groups AS g (task_group_id, scheduler_id, expires, sealed) VALUES (:task_group_id, :scheduler_id, :expires, NULL)
ON CONFLICT (task_group_id) DO UPDATE
   SET scheduler_id = CASE WHEN g.expires < :now THEN excluded.scheduler_id ELSE g.scheduler_id END,
       sealed = CASE WHEN g.expires < :now THEN NULL ELSE g.sealed END,
       expires = CASE WHEN g.expires < :now OR g.expires < :needed THEN excluded.expires ELSE g.expires END

-- name: join_group
-- Join a task to its group: create the group, renew it if it expired before :now, or extend its
-- expiry to :expires if it would end before :needed; answer the group's schedulerId and seal, and
-- whether task :task_id exists already (createTask's repeat check, without a statement of its own).
-- differs: answers by RETURNING; PostgreSQL's from its two CTEs (live, joined).
{{_join_group}}
RETURNING scheduler_id, sealed, EXISTS (SELECT 1 FROM tasks WHERE task_id = :task_id) AS task_exists

-- name: join_group_checked
-- Parameters, in order: :task_group_id, :scheduler_id, :expires, :now, :needed.
-- join_group for a task known to be new, as a checked write (Tx.defer_checked): it answers no row
-- (which fails the transaction) unless the group, joined, is :scheduler_id's and unsealed.
-- createTask then goes the way that reads join_group's answer, to say what was wrong.
-- differs: fails by answering no row; PostgreSQL's by a division by zero over its two CTEs.
{{_join_group}}
 WHERE g.expires < :now OR (g.scheduler_id = excluded.scheduler_id AND g.sealed IS NULL)
RETURNING 1

-- name: insert_task_graph_tasks
-- A graph's task rows in one statement: $2 is a JSON list of [taskId, position, label, requires, reruns].
-- differs: JSON arrays read with json_extract; PostgreSQL's jsonb_array_elements with casts.
INSERT INTO task_graph_tasks (task_id, task_graph_id, position, label, requires, reruns, reruns_left)
SELECT json_extract(value, '$[0]'), $1, json_extract(value, '$[1]'), json_extract(value, '$[2]'),
       json_extract(value, '$[3]'), json_extract(value, '$[4]'), json_extract(value, '$[4]')
  FROM json_each($2)

-- name: ui_group_tasks
-- The web UI's group page: what its table shows of each task of a group, and nothing more:
-- id, state, name, how many runs, the last run's start, end, worker and reasonResolved.
-- differs: JSON paths: SQLite's '$.a' and '$[#-1]', PostgreSQL's #>> '{a}' and -> -1 on text cast
-- to json.
SELECT task_id, state, definition ->> '$.metadata.name' AS name, json_array_length(runs) AS runs,
       runs ->> '$[#-1].started' AS started, runs ->> '$[#-1].resolved' AS resolved,
       runs ->> '$[#-1].workerGroup' AS worker_group, runs ->> '$[#-1].workerId' AS worker_id,
       runs ->> '$[#-1].reasonResolved' AS reason
  FROM tasks WHERE task_group_id = $1 ORDER BY task_id

-- name: ui_group_graph
-- The web UI's graph of a group: each task's id, state, name and dependencies (a JSON list).
-- differs: JSON paths: SQLite's '$.a' and '$[#-1]', PostgreSQL's #>> '{a}' and -> -1 on text cast
-- to json.
SELECT task_id, state, definition ->> '$.metadata.name' AS name, definition -> '$.dependencies' AS dependencies
  FROM tasks WHERE task_group_id = $1 ORDER BY task_id

-- name: plan_generically
-- differs: SQLite plans each statement once when it prepares it: nothing to change.
SELECT $1

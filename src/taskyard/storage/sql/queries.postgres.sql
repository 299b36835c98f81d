-- PostgreSQL's own forms of the queries whose shape differs from SQLite's. Where only a word or two
-- differ (a row lock, a list parameter, a cast), the query is written once in queries.sql with the
-- dialect words of storage/_queries.py. Each query here says why it differs (`-- differs:`).

-- name: update_tasks
-- update_task_checked for many tasks in one statement: $1 is a JSON list of objects holding its
-- parameters. Answers the taskIds written: a row whose version moved is left as it is.
-- differs: rows from a JSON list: PostgreSQL's json_to_recordset types each column, SQLite reads
-- them from json_each.
UPDATE tasks t
   SET runs = v.runs, state = v.state, retries_left = v.retries_left, taken_until = v.taken_until,
       claimed_at = v.claimed_at, ever_resolved = v.ever_resolved, priority = v.priority,
       version = v.version
  FROM json_to_recordset($1::json) AS v(task_id text, old_version integer, runs text, state text,
                                         retries_left integer, taken_until bigint, claimed_at bigint,
                                         ever_resolved boolean, priority text, version integer)
 WHERE t.task_id = v.task_id AND t.version = v.old_version
RETURNING t.task_id

-- name: insert_pending_runs
-- insert_pending for many runs: $1 is a JSON list of objects holding its parameters.
-- differs: rows from a JSON list: PostgreSQL's json_to_recordset types each column, SQLite reads
-- them from json_each.
INSERT INTO pending_runs (task_id, run_id, task_queue_id, priority, inserted, deadline)
SELECT task_id, run_id, task_queue_id, priority, inserted, deadline
  FROM json_to_recordset($1::json) AS v(task_id text, run_id integer, task_queue_id text,
                                         priority integer, inserted bigint, deadline bigint)
ON CONFLICT (task_id, run_id) DO NOTHING

-- name: insert_poll_messages
-- insert_poll_message for many runs: $1 is a JSON list of objects holding its parameters.
-- differs: rows from a JSON list: PostgreSQL's json_to_recordset types each column, SQLite reads
-- them from json_each.
INSERT INTO poll_messages (message_id, queue_name, task_id, run_id, inserted, expires, visible, dequeue_count)
SELECT message_id, queue_name, task_id, run_id, inserted, expires, inserted, 0
  FROM json_to_recordset($1::json) AS v(message_id text, queue_name text, task_id text,
                                         run_id integer, inserted bigint, expires bigint)

-- name: log_events
-- The events (outbox ids, the JSON list $2) the relay published at $1, in that order: their log
-- ids count in it, and are answered (the newest goes with the relay's notification). Lists of ids
-- are JSON, not bigint[]: asyncpg has no codec of its own for bigint[], and would look the type up
-- on each new connection, a query that costs the server about 13 ms to plan.
-- differs: a JSON list's elements in order: WITH ORDINALITY and casts here, json_each's key on
-- SQLite.
INSERT INTO event_log (published, event)
SELECT $1::bigint, e::bigint FROM json_array_elements_text($2::json) WITH ORDINALITY AS v(e, n) ORDER BY n
RETURNING id

-- name: insert_events
-- insert_event for many events, in the order of the JSON list $1 of [exchange, routing_key, cc,
-- body]; $2 is when.
-- differs: a JSON list's elements in order: WITH ORDINALITY and casts here, json_each's key on
-- SQLite.
INSERT INTO outbox (exchange, routing_key, cc, body, created)
SELECT e ->> 0, e ->> 1, e ->> 2, e ->> 3, $2::bigint
  FROM json_array_elements($1::json) WITH ORDINALITY AS v(e, n) ORDER BY n

-- name: take_pending
-- Take the first claimable runs for a worker that is not quarantined: their claim-index rows are
-- deleted and answered with their task rows, both locked, and with the worker's own row (its
-- columns as worker_*, NULL for a worker never seen). A run whose pending row or task row another
-- transaction holds (a claim, a cancel, a priority change) is skipped, never waited for, and
-- stays. The pending rows are chosen first, from the claim index alone, so the cost does not grow
-- with the backlog even before the planner has statistics. A quarantined worker takes nothing.
-- The count is written in (the line below), so PostgreSQL keeps a plan per count, where with a
-- parameter it planned most claims afresh (a plan for any count is one for a tenth of the backlog).
-- literal: count
-- differs: CTEs that skip locked pending and task rows, the count written in; SQLite deletes with
-- RETURNING.
WITH p AS (
    SELECT task_id, run_id, priority, inserted FROM pending_runs
     WHERE task_queue_id = :task_queue_id AND deadline > :now
       AND NOT EXISTS (SELECT 1 FROM workers w
                        WHERE w.task_queue_id = :task_queue_id AND w.worker_group = :worker_group
                          AND w.worker_id = :worker_id AND w.quarantine_until > :now)
     ORDER BY priority DESC, inserted, task_id
     LIMIT :count
       FOR UPDATE SKIP LOCKED
), w AS (
    SELECT * FROM workers
     WHERE task_queue_id = :task_queue_id AND worker_group = :worker_group AND worker_id = :worker_id
), taken AS (
    SELECT t.*, p.run_id AS pending_run_id, p.priority AS pending_priority, p.inserted AS pending_inserted
      FROM p JOIN tasks t ON t.task_id = p.task_id
       FOR UPDATE OF t SKIP LOCKED
), gone AS (
    DELETE FROM pending_runs d USING taken
     WHERE d.task_id = taken.task_id AND d.run_id = taken.pending_run_id
)
SELECT taken.*, w.first_claim AS worker_first_claim, w.expires AS worker_expires,
       w.quarantine_until AS worker_quarantine_until, w.quarantine_details AS worker_quarantine_details,
       w.recent_tasks AS worker_recent_tasks
  FROM taken LEFT JOIN w ON TRUE
 ORDER BY pending_priority DESC, pending_inserted, task_id

-- name: lock_relay
-- Only one relay at a time across processes, and in commit order: sent ahead of take_events (a
-- deferred write), so that statement's snapshot sees what the relay before it committed.
-- differs: an advisory lock, one relay across processes; SQLite's BEGIN IMMEDIATE is lock enough.
SELECT pg_advisory_xact_lock($1)

-- name: take_events
-- The next $1 events to publish, in order: those of the open window (or of one opened now, up to
-- this statement's snapshot) after its cursor. Each answers the window's end and its own xid, for
-- `relayed` (migration 0013 tells the scheme). What `done` does not show is the rows of the
-- transactions it saw running (its xip list: a few) and those from its xmax on: read as two
-- parts, each from the cursor on, the second an ordered range, so that neither a transaction
-- left open for long nor a backlog makes a page read more than it takes. LATERAL and LIMIT 1: so
-- whatever the planner's statistics say of the one-row state table (unanalyzed, it guesses
-- hundreds of rows, and a plan costly enough to be compiled, which took half a second).
-- differs: snapshot windows (migration 0013): ids are not in commit order here, as they are on
-- SQLite.
SELECT o.id, o.xid::text AS xid, r.window_end::text AS window_end, o.exchange, o.routing_key, o.cc, o.body
  FROM (SELECT done, window_end, after_xid, after_id,
               -- the second part's start: the cursor, if it is there already, else done's xmax
               CASE WHEN after_xid >= pg_snapshot_xmax(done) THEN after_xid
                    ELSE pg_snapshot_xmax(done) END AS range_xid,
               CASE WHEN after_xid >= pg_snapshot_xmax(done) THEN after_id
                    ELSE -9223372036854775808 END AS range_id
          FROM (SELECT done, COALESCE(window_end, pg_current_snapshot()) AS window_end,
                       CASE WHEN window_end IS NULL THEN '0'::xid8 ELSE after_xid END AS after_xid,
                       CASE WHEN window_end IS NULL THEN -9223372036854775808 ELSE after_id END AS after_id
                  FROM outbox_relayed LIMIT 1) AS state) AS r
 CROSS JOIN LATERAL (
    (SELECT * FROM outbox
      WHERE xid = ANY(ARRAY(SELECT pg_snapshot_xip(r.done))) AND (xid, id) > (r.after_xid, r.after_id)
        AND pg_visible_in_snapshot(xid, r.window_end)
      ORDER BY xid, id
      LIMIT $1)
    UNION ALL
    (SELECT * FROM outbox
      WHERE (xid, id) > (r.range_xid, r.range_id)
        AND xid < pg_snapshot_xmax(r.window_end) AND pg_visible_in_snapshot(xid, r.window_end)
      ORDER BY xid, id
      LIMIT $1)
 ) AS o
 ORDER BY o.xid, o.id
 LIMIT $1

-- name: relayed
-- The relay published the window ending at snapshot $1 up to event ($2 xid, $3 id); $4: that was
-- the window's last event, so every event that snapshot shows is published.
-- differs: snapshot windows (migration 0013); SQLite's is a cursor of ids.
UPDATE outbox_relayed
   SET done = CASE WHEN $4::boolean THEN $1::pg_snapshot ELSE done END,
       window_end = CASE WHEN $4::boolean THEN NULL ELSE $1::pg_snapshot END,
       after_xid = CASE WHEN $4::boolean THEN '0'::xid8 ELSE $2::xid8 END,
       after_id = CASE WHEN $4::boolean THEN 0 ELSE $3::bigint END

-- name: rebase_outbox
-- A database restored into a cluster whose transaction ids are behind those it was dumped from:
-- its rows and snapshots mean nothing against the new ids. Before anything writes, each event
-- keeps its state under the old ids (2: published, 3: not) and `done` starts over; answers how
-- many rows it re-dated (0: the ids are in order, nothing done).
-- differs: transaction ids restored behind the cluster's: PostgreSQL's alone (the adapter runs it).
WITH behind AS (
    SELECT 1 FROM outbox_relayed
     WHERE GREATEST(pg_snapshot_xmax(done), pg_snapshot_xmax(COALESCE(window_end, done)))
           > pg_snapshot_xmax(pg_current_snapshot())
), redated AS (
    UPDATE outbox SET xid = CASE WHEN id IN (SELECT id FROM unpublished_events) THEN '3'::xid8
                                 ELSE '2'::xid8 END
     WHERE EXISTS (SELECT 1 FROM behind)
    RETURNING 1
), reset AS (
    UPDATE outbox_relayed SET done = '3:3:', window_end = NULL, after_xid = '0', after_id = 0
     WHERE EXISTS (SELECT 1 FROM behind)
)
SELECT count(*) FROM redated

-- name: update_task_checked
-- A task row's update, checked (Tx.defer_checked): a deferred write whose answer nobody reads,
-- so a row found moved fails the transaction by a division by zero (RowMoved).
-- differs: a deferred write whose answer nobody reads: a moved row fails it by a division by zero.
WITH written AS (
{{_update_task}}
)
SELECT 1 / count(*) FROM written

-- name: _join_group
-- join_group's and join_group_checked's group, joined: `live` the group that lasts long enough,
-- `joined` the one created, renewed or extended (one of the two holds a row).
-- differs: PostgreSQL only locks a live group FOR SHARE (a CTE); a checked write fails by a
-- division by zero.
WITH live AS (
  SELECT scheduler_id, sealed FROM task_groups
   WHERE task_group_id = :task_group_id AND expires >= :now AND expires >= :needed
     FOR SHARE
), joined AS (
  INSERT INTO task_groups AS g (task_group_id, scheduler_id, expires, sealed)
  SELECT :task_group_id, :scheduler_id, :expires, NULL WHERE NOT EXISTS (SELECT 1 FROM live)
  ON CONFLICT (task_group_id) DO UPDATE
     SET scheduler_id = CASE WHEN g.expires < :now THEN excluded.scheduler_id ELSE g.scheduler_id END,
         sealed = CASE WHEN g.expires < :now THEN NULL ELSE g.sealed END,
         expires = CASE WHEN g.expires < :now OR g.expires < :needed THEN excluded.expires ELSE g.expires END
  RETURNING g.scheduler_id, g.sealed
)

-- name: join_group
-- Join a task to its group: create the group, renew it if it expired before :now, or extend its
-- expiry to :expires if it would end before :needed; answer the group's schedulerId and seal, and
-- whether task :task_id exists already (createTask's repeat check, without a statement of its own).
-- A live group that lasts long enough is only locked FOR SHARE, so tasks join one group
-- concurrently; sealTaskGroup's UPDATE waits for them, and they for it. Only a group to create,
-- renew or extend is written, under the row's exclusive lock.
-- differs: answers from its two CTEs (live, joined); SQLite's by RETURNING.
{{_join_group}}
SELECT scheduler_id, sealed, EXISTS (SELECT 1 FROM tasks WHERE task_id = :task_id) AS task_exists
  FROM (SELECT * FROM live UNION ALL SELECT * FROM joined) AS j

-- name: join_group_checked
-- Parameters, in order: :task_group_id, :scheduler_id, :expires, :now, :needed.
-- join_group for a task known to be new, as a checked write (Tx.defer_checked): the division by
-- zero fails the transaction (RowMoved) unless the group, joined, is :scheduler_id's and unsealed.
-- createTask then goes the way that reads join_group's answer, to say what was wrong.
-- differs: fails by a division by zero over its two CTEs; SQLite's by answering no row.
{{_join_group}}
SELECT 1 / count(*) FROM (SELECT * FROM live UNION ALL SELECT * FROM joined) AS j
 WHERE j.scheduler_id = :scheduler_id AND j.sealed IS NULL

-- name: insert_task_graph_tasks
-- A graph's task rows in one statement: $2 is a JSON list of [taskId, position, label, requires, reruns].
-- differs: JSON arrays read with jsonb_array_elements and casts; SQLite's with json_extract.
INSERT INTO task_graph_tasks (task_id, task_graph_id, position, label, requires, reruns, reruns_left)
SELECT e->>0, $1, (e->>1)::integer, e->>2, e->>3, (e->>4)::integer, (e->>4)::integer
  FROM jsonb_array_elements($2::jsonb) AS e

-- name: ui_group_tasks
-- The web UI's group page: what its table shows of each task of a group, and nothing more:
-- id, state, name, how many runs, the last run's start, end, worker and reasonResolved.
-- differs: JSON paths: SQLite's '$.a' and '$[#-1]', PostgreSQL's #>> '{a}' and -> -1 on text cast
-- to json.
SELECT t.task_id, t.state, t.definition::json #>> '{metadata,name}' AS name, json_array_length(r.runs) AS runs,
       r.runs -> -1 ->> 'started' AS started, r.runs -> -1 ->> 'resolved' AS resolved,
       r.runs -> -1 ->> 'workerGroup' AS worker_group, r.runs -> -1 ->> 'workerId' AS worker_id,
       r.runs -> -1 ->> 'reasonResolved' AS reason
  FROM tasks t CROSS JOIN LATERAL (SELECT t.runs::json AS runs) r
 WHERE t.task_group_id = $1 ORDER BY t.task_id

-- name: ui_group_graph
-- The web UI's graph of a group: each task's id, state, name and dependencies (a JSON list).
-- differs: JSON paths: SQLite's '$.a' and '$[#-1]', PostgreSQL's #>> '{a}' and -> -1 on text cast
-- to json.
SELECT t.task_id, t.state, d.definition #>> '{metadata,name}' AS name, (d.definition -> 'dependencies')::text AS dependencies
  FROM tasks t CROSS JOIN LATERAL (SELECT t.definition::json AS definition) d
 WHERE t.task_group_id = $1 ORDER BY t.task_id

-- name: expire_seen_requests
-- Up to $2 signed requests whose timestamps left Hawk's window before $1.
-- differs: by row ids (ctid): the shared form's row-value IN becomes a hash join over the whole
-- table here.
DELETE FROM seen_requests
 WHERE ctid = ANY (ARRAY(SELECT ctid FROM seen_requests WHERE expires < $1 ORDER BY expires LIMIT $2))

-- name: plan_generically
-- For the rest of the transaction, statements prepared before run on a plan made once for any
-- parameters ($1: 'force_generic_plan'). The dependency resolver's queries take lists, for which
-- PostgreSQL's cost model never prefers the generic plan, so it planned them afresh on every call:
-- 150 µs of its CPU per lifecycle, more than running them.
-- differs: a PostgreSQL setting; SQLite plans each statement once when it prepares it.
SELECT set_config('plan_cache_mode', $1, true)

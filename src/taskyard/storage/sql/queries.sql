-- Named queries shared by both dialects. `$n` parameters; instants are epoch milliseconds. Where the
-- dialects differ by a word, a `{{word}}` (storage/_queries.py): `{{for_update}}`, `{{in_texts($1)}}`.

-- name: insert_task
INSERT INTO tasks (task_id, task_group_id, scheduler_id, project_id, task_queue_id, priority, requires,
                   retries_left, created, deadline, expires, definition, runs, state, taken_until,
                   claimed_at, ever_resolved, version)
VALUES (:task_id, :task_group_id, :scheduler_id, :project_id, :task_queue_id, :priority, :requires,
        :retries_left, :created, :deadline, :expires, :definition, :runs, :state, :taken_until,
        :claimed_at, :ever_resolved, :version)

-- name: get_task
SELECT * FROM tasks WHERE task_id = $1

-- name: get_task_for_update
SELECT * FROM tasks WHERE task_id = $1 {{for_update}}

-- name: get_tasks
SELECT * FROM tasks WHERE task_id {{in_texts($1)}} ORDER BY task_id

-- name: get_tasks_for_update
-- Locked in taskId order, as every caller that locks several tasks locks them.
SELECT * FROM tasks WHERE task_id {{in_texts($1)}} ORDER BY task_id {{for_update}}

-- name: lock_required_tasks
SELECT task_id, state, expires FROM tasks WHERE task_id {{in_texts($1)}} {{for_share}}

-- name: _update_task
UPDATE tasks
   SET runs = :runs, state = :state, retries_left = :retries_left, taken_until = :taken_until,
       claimed_at = :claimed_at, ever_resolved = :ever_resolved, priority = :priority,
       version = :version
 WHERE task_id = :task_id AND version = :old_version AND created = :created
RETURNING 1

-- name: update_task_checked
-- A task row's update, checked (Tx.defer_checked): it answers a row if the row was still at the
-- version read, of the task created then (not one made anew under its taskId since), none if it
-- moved (which fails the transaction). A transaction that read the row locked finds it unmoved;
-- an optimistic one that lost a race reads again. (A fragment, which PostgreSQL's form wraps.)
{{_update_task}}

-- name: insert_pending
INSERT INTO pending_runs (task_id, run_id, task_queue_id, priority, inserted, deadline)
VALUES (:task_id, :run_id, :task_queue_id, :priority, :inserted, :deadline)
ON CONFLICT (task_id, run_id) DO NOTHING

-- name: delete_pending_run
DELETE FROM pending_runs WHERE task_id = $1 AND run_id = $2

-- name: delete_pending_for_task
DELETE FROM pending_runs WHERE task_id = $1

-- name: update_pending_priority
UPDATE pending_runs SET priority = $2 WHERE task_id = $1

-- name: count_pending
SELECT count(*) FROM pending_runs WHERE task_queue_id = $1

-- name: list_pending
SELECT p.task_id, p.run_id, p.inserted, t.definition
  FROM pending_runs p JOIN tasks t ON t.task_id = p.task_id
 WHERE p.task_queue_id = $1 AND (p.inserted > $2 OR (p.inserted = $2 AND p.task_id > $3))
 ORDER BY p.inserted, p.task_id
 LIMIT $4

-- name: count_claimed
SELECT count(*) FROM tasks WHERE task_queue_id = $1 AND state = 'running'

-- name: list_claimed
SELECT task_id, runs, claimed_at, definition
  FROM tasks
 WHERE task_queue_id = $1 AND state = 'running'
   AND (claimed_at > $2 OR (claimed_at = $2 AND task_id > $3))
 ORDER BY claimed_at, task_id
 LIMIT $4

-- name: insert_dependency
INSERT INTO task_dependencies (required_task_id, dependent_task_id, requires, satisfied, expires)
VALUES ($1, $2, $3, $4, $5)

-- name: list_dependents
-- A page of the task's dependents after taskId $2 ('' from the start), entered at that key of the
-- edges' primary key, so a deep page costs what the first does.
SELECT t.* FROM task_dependencies d JOIN tasks t ON t.task_id = d.dependent_task_id
 WHERE d.required_task_id = $1 AND d.dependent_task_id > $2
 ORDER BY d.dependent_task_id
 LIMIT $3

-- name: insert_resolution
INSERT INTO task_resolutions (task_id, task_group_id, resolution) VALUES ($1, $2, $3)

-- name: waiting_resolutions
-- The oldest final resolutions, without taking them (the resolver takes them one at a time).
SELECT id, task_id, task_group_id, resolution FROM task_resolutions ORDER BY id LIMIT $1

-- name: take_resolutions
SELECT id, task_id, task_group_id, resolution FROM task_resolutions
 ORDER BY id LIMIT $1 {{for_update_skip_locked}}

-- name: take_resolution
-- One resolution, unless another process holds it; no row if it is gone or held.
SELECT id FROM task_resolutions WHERE id = $1 {{for_update_skip_locked}}

-- name: take_resolutions_again
-- These resolutions (ids, a JSON list), those still there and not held by another process, to go
-- on with them.
SELECT id, task_id, task_group_id, resolution FROM task_resolutions
 WHERE id {{in_ids($1)}} ORDER BY id {{for_update_skip_locked}}

-- name: satisfy_dependencies_of
-- Edges satisfied by a batch of final resolutions: $1 every resolved task, $2 those completed.
UPDATE task_dependencies SET satisfied = TRUE
 WHERE NOT satisfied
   AND (required_task_id {{in_texts($2)}}
        OR (requires = 'all-resolved' AND required_task_id {{in_texts($1)}}))

-- name: unblocked_dependents
-- Dependents of these tasks ($1) that wait for no other task and were never scheduled: the first
-- $3 after taskId $2.
SELECT DISTINCT d.dependent_task_id FROM task_dependencies d
  JOIN tasks t ON t.task_id = d.dependent_task_id
 WHERE d.required_task_id {{in_texts($1)}} AND d.dependent_task_id > $2
   AND t.state = 'unscheduled'
   AND NOT EXISTS (SELECT 1 FROM task_dependencies o
                    WHERE o.dependent_task_id = d.dependent_task_id AND NOT o.satisfied)
 ORDER BY d.dependent_task_id
 LIMIT $3

-- name: resolved_groups
-- Of these groups, those with no task still waiting for a final resolution.
SELECT * FROM task_groups g
 WHERE g.task_group_id {{in_texts($1)}}
   AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.task_group_id = g.task_group_id AND NOT t.ever_resolved)
 ORDER BY g.task_group_id

-- name: delete_resolutions
-- These resolutions (ids, a JSON list).
DELETE FROM task_resolutions WHERE id {{in_ids($1)}}

-- name: get_group
SELECT * FROM task_groups WHERE task_group_id = $1

-- name: insert_group
INSERT INTO task_groups (task_group_id, scheduler_id, expires, sealed) VALUES ($1, $2, $3, NULL)

-- name: seal_group
UPDATE task_groups SET sealed = $2 WHERE task_group_id = $1 AND sealed IS NULL

-- name: list_group_tasks
-- A page of the group's tasks after task id $2 ('' from the start): tasks_by_group is entered at that
-- key, so a page deep in a large group costs what the first page does (an OFFSET would walk past
-- every task before it).
SELECT * FROM tasks WHERE task_group_id = $1 AND task_id > $2 ORDER BY task_id LIMIT $3

-- name: group_size
SELECT count(*) FROM tasks WHERE task_group_id = $1

-- name: group_open_task_ids
SELECT task_id FROM tasks
 WHERE task_group_id = $1 AND state IN ('unscheduled', 'pending', 'running') AND deadline > $2
 ORDER BY task_id

-- name: get_task_queue
SELECT * FROM task_queues WHERE task_queue_id = $1

-- name: list_task_queues
SELECT * FROM task_queues WHERE expires > $1 AND task_queue_id > $2 ORDER BY task_queue_id LIMIT $3

-- name: list_task_queues_with_prefix
SELECT * FROM task_queues
 WHERE expires > $1 AND task_queue_id > $2 AND substr(task_queue_id, 1, length($4)) = $4
 ORDER BY task_queue_id LIMIT $3

-- name: upsert_task_queue
INSERT INTO task_queues (task_queue_id, expires, last_date_active) VALUES ($1, $2, $3)
ON CONFLICT (task_queue_id) DO UPDATE
   SET expires = CASE WHEN task_queues.expires > excluded.expires THEN task_queues.expires
                      ELSE excluded.expires END,
       last_date_active = excluded.last_date_active

-- name: get_worker
SELECT * FROM workers WHERE task_queue_id = $1 AND worker_group = $2 AND worker_id = $3

-- name: list_workers
SELECT * FROM workers
 WHERE task_queue_id = $1 AND (expires > $2 OR quarantine_until > $2)
   AND (worker_group > $3 OR (worker_group = $3 AND worker_id > $4))
 ORDER BY worker_group, worker_id LIMIT $5

-- name: upsert_worker
INSERT INTO workers (task_queue_id, worker_group, worker_id, first_claim, last_date_active, expires,
                     quarantine_until, quarantine_details, recent_tasks)
VALUES (:task_queue_id, :worker_group, :worker_id, :first_claim, :last_date_active, :expires,
        :quarantine_until, :quarantine_details, :recent_tasks)
ON CONFLICT (task_queue_id, worker_group, worker_id) DO UPDATE
   SET last_date_active = excluded.last_date_active, expires = excluded.expires,
       quarantine_until = excluded.quarantine_until, quarantine_details = excluded.quarantine_details,
       recent_tasks = excluded.recent_tasks

-- name: insert_event
INSERT INTO outbox (exchange, routing_key, cc, body, created) VALUES ($1, $2, $3, $4, $5)

-- name: metrics_pending
-- Per task queue: pending runs and the oldest one's insertion time; the $1 queues with the most.
SELECT task_queue_id, count(*) AS pending, min(inserted) AS oldest
  FROM pending_runs
 GROUP BY task_queue_id
 ORDER BY count(*) DESC, task_queue_id
 LIMIT $1

-- name: metrics_claimed
-- Per task queue: running tasks (the partial index on running tasks keeps this to them).
SELECT task_queue_id, count(*) AS claimed
  FROM tasks
 WHERE state = 'running'
 GROUP BY task_queue_id
 ORDER BY count(*) DESC, task_queue_id
 LIMIT $1

-- name: metrics_outbox
-- Events not yet relayed (counted up to $1) and when the oldest was written.
SELECT (SELECT count(*) FROM (SELECT 1 FROM unpublished_events LIMIT $1) AS capped) AS depth,
       (SELECT min(created) FROM unpublished_events) AS oldest

-- name: logged_events
-- The published events after id $1 up to id $2, oldest first, at most $3.
SELECT l.id, o.exchange, o.routing_key, o.cc, o.body FROM event_log l JOIN outbox o ON o.id = l.event
 WHERE l.id > $1 AND l.id <= $2
 ORDER BY l.id LIMIT $3

-- name: event_log_end
-- The newest id published and the highest pruned (0 and 0 for an empty log).
SELECT COALESCE((SELECT MAX(id) FROM event_log), 0) AS newest, (SELECT through FROM event_log_pruned) AS pruned

-- name: event_log_prunable
-- The highest id among the oldest $2 events published before $1 (NULL: none).
SELECT MAX(id) FROM (SELECT id FROM event_log WHERE published < $1 ORDER BY id LIMIT $2) AS old

-- name: prune_events
-- The events of the log's ids up to $1: each is in the outbox until its log entry goes.
DELETE FROM outbox WHERE id IN (SELECT event FROM event_log WHERE id <= $1)

-- name: prune_event_log
DELETE FROM event_log WHERE id <= $1

-- name: mark_event_log_pruned
UPDATE event_log_pruned SET through = $1 WHERE through < $1

-- name: expired_claims
SELECT task_id, taken_until FROM tasks
 WHERE state = 'running' AND taken_until < $1
 ORDER BY taken_until LIMIT $2

-- name: overdue_tasks
SELECT task_id, deadline FROM tasks
 WHERE state IN ('unscheduled', 'pending', 'running') AND deadline < $1
 ORDER BY deadline LIMIT $2

-- name: expire_tasks
DELETE FROM tasks WHERE expires < $1

-- name: expire_pending
DELETE FROM pending_runs WHERE deadline < $1

-- name: expire_dependencies
DELETE FROM task_dependencies WHERE expires < $1

-- name: expire_groups
DELETE FROM task_groups WHERE expires < $1

-- name: expire_task_graph_tasks
-- The rows of the graphs `expire_task_graphs` deletes next (a graph outlives none of its tasks).
DELETE FROM task_graph_tasks
 WHERE task_graph_id IN (SELECT task_graph_id FROM task_graphs WHERE expires < $1)

-- name: expire_task_graphs
DELETE FROM task_graphs WHERE expires < $1

-- name: expire_task_queues
DELETE FROM task_queues WHERE expires < $1

-- name: expire_workers
DELETE FROM workers WHERE expires < $1 AND (quarantine_until IS NULL OR quarantine_until < $1)


-- ---------------------------------------------------------------------------------------------
-- Auth: clients, roles and the generation counter that tells processes their caches are stale.

-- name: bump_auth_generation
-- First statement of every auth change: the row lock serialises changes across processes.
UPDATE auth_generation SET generation = generation + 1 WHERE id = 1 RETURNING generation

-- name: record_signed_request
-- A Hawk-signed request's MAC, with the first transaction of the request (storage/port.py,
-- Replays); the primary key, (expires, mac), refuses it a second time: a replay.
INSERT INTO seen_requests (mac, expires) VALUES ($1, $2)

-- name: expire_seen_requests
-- Up to $2 signed requests whose timestamps left Hawk's window before $1 (replays of them are
-- refused as stale): the left edge of the primary key.
DELETE FROM seen_requests
 WHERE (expires, mac) IN (SELECT expires, mac FROM seen_requests WHERE expires < $1
                           ORDER BY expires, mac LIMIT $2)

-- name: get_auth_generation
SELECT generation FROM auth_generation WHERE id = 1

-- name: claim_auth_secret_check
UPDATE auth_generation SET secret_check = $1 WHERE id = 1 AND secret_check IS NULL

-- name: get_auth_secret_check
SELECT secret_check FROM auth_generation WHERE id = 1

-- name: insert_client
INSERT INTO clients (client_id, description, scopes, token_salt, expires, disabled, delete_on_expiration,
                     created, last_modified, last_date_used, last_rotated)
VALUES (:client_id, :description, :scopes, :token_salt, :expires, FALSE, :delete_on_expiration,
        :now, :now, :now, :now)
ON CONFLICT (client_id) DO NOTHING

-- name: get_client
SELECT * FROM clients WHERE client_id = $1

-- name: list_clients
SELECT * FROM clients
 WHERE client_id > $1 AND substr(client_id, 1, length($2)) = $2
 ORDER BY client_id LIMIT $3

-- name: update_client
UPDATE clients
   SET description = :description, scopes = :scopes, expires = :expires,
       delete_on_expiration = :delete_on_expiration, last_modified = :now
 WHERE client_id = :client_id

-- name: set_client_disabled
UPDATE clients SET disabled = $2 WHERE client_id = $1

-- name: rotate_client_token
UPDATE clients SET token_salt = $2, last_rotated = $3 WHERE client_id = $1

-- name: touch_client
UPDATE clients SET last_date_used = $2 WHERE client_id = $1 AND last_date_used < $2

-- name: delete_client
DELETE FROM clients WHERE client_id = $1

-- name: expired_clients
SELECT client_id FROM clients WHERE delete_on_expiration AND expires < $1 LIMIT $2

-- name: expire_clients
DELETE FROM clients WHERE delete_on_expiration AND expires < $1

-- name: list_roles
SELECT * FROM roles ORDER BY role_id

-- name: get_role
SELECT * FROM roles WHERE role_id = $1

-- name: insert_role
INSERT INTO roles (role_id, description, scopes, created, last_modified) VALUES ($1, $2, $3, $4, $4)
ON CONFLICT (role_id) DO NOTHING

-- name: update_role
UPDATE roles SET description = $2, scopes = $3, last_modified = $4 WHERE role_id = $1

-- name: delete_role
DELETE FROM roles WHERE role_id = $1

-- name: get_artifact
SELECT * FROM artifacts WHERE task_id = $1 AND run_id = $2 AND name = $3

-- name: get_artifact_with_runs
-- An upload's check before its body is read: the artifact, with its task's runs (NULL: task gone).
SELECT a.*, t.runs AS task_runs FROM artifacts a LEFT JOIN tasks t ON t.task_id = a.task_id
 WHERE a.task_id = $1 AND a.run_id = $2 AND a.name = $3

-- name: put_artifact
INSERT INTO artifacts (task_id, run_id, name, storage_type, content_type, expires, details, present,
                       upload_token)
VALUES (:task_id, :run_id, :artifact_name, :storage_type, :content_type, :expires, :details,
        :present, :upload_token)
ON CONFLICT (task_id, run_id, name) DO UPDATE
   SET storage_type = excluded.storage_type, content_type = excluded.content_type,
       expires = excluded.expires, details = excluded.details, present = excluded.present,
       upload_token = excluded.upload_token

-- name: finish_upload
-- Close the upload that $4 opened; no row changes if another PUT (or a newer URL) got there first.
UPDATE artifacts SET upload_token = NULL
 WHERE task_id = $1 AND run_id = $2 AND name = $3 AND upload_token = $4

-- name: expired_artifacts
SELECT task_id, run_id, name, storage_type FROM artifacts WHERE expires < $1 LIMIT $2

-- name: delete_artifact
DELETE FROM artifacts WHERE task_id = $1 AND run_id = $2 AND name = $3


-- ---------------------------------------------------------------------------------------------
-- Live logs: a head row per run and its text in chunks, each keyed by its first byte's offset.

-- name: list_artifacts
-- Names compare by bytes in both dialects, whatever PostgreSQL's database's collation.
SELECT * FROM artifacts
 WHERE task_id = $1 AND run_id = $2 AND {{bytewise(name)}} > $3
 ORDER BY {{bytewise(name)}} LIMIT $4

-- name: get_task_and_artifact_for_update
-- createArtifact's one read: the task row, locked, with the artifact it may replace (columns
-- `artifact_*`, NULL when there is none).
SELECT t.*, a.storage_type AS artifact_storage_type, a.content_type AS artifact_content_type,
       a.expires AS artifact_expires, a.details AS artifact_details, a.present AS artifact_present,
       a.upload_token AS artifact_upload_token
  FROM tasks t LEFT JOIN artifacts a ON a.task_id = t.task_id AND a.run_id = $2 AND a.name = $3
 WHERE t.task_id = $1
   {{for_update_of(t)}}

-- name: get_latest_artifact
-- The artifact of the task's latest run, in one read (no row: look again to say what is missing).
SELECT a.* FROM artifacts a
 WHERE a.task_id = $1 AND a.name = $2
   AND a.run_id = (SELECT json_array_length({{as_json(t.runs)}}) - 1 FROM tasks t WHERE t.task_id = $1)

-- name: get_live_log
SELECT * FROM live_logs WHERE task_id = $1 AND run_id = $2

-- name: get_live_log_for_update
-- Racing appends to one live log take turns: the loser sees the winner's length.
SELECT * FROM live_logs WHERE task_id = $1 AND run_id = $2 {{for_update}}

-- name: insert_live_log
-- Racing first appends: one inserts, the others insert nothing and then read (and lock) its row.
INSERT INTO live_logs (task_id, run_id, name, length, closed, expires) VALUES ($1, $2, $3, 0, FALSE, $4)
ON CONFLICT (task_id, run_id) DO NOTHING

-- name: update_live_log
UPDATE live_logs SET length = $3, closed = $4 WHERE task_id = $1 AND run_id = $2

-- name: insert_live_log_chunk
INSERT INTO live_log_chunks (task_id, run_id, byte_offset, data) VALUES ($1, $2, $3, $4)

-- name: live_log_chunks
SELECT byte_offset, data FROM live_log_chunks
 WHERE task_id = $1 AND run_id = $2 AND byte_offset >= $3
 ORDER BY byte_offset LIMIT $4

-- name: live_log_state
-- What tells a follower to stop: the log closed, or its run no longer running (the task's runs).
SELECT l.closed, t.runs FROM live_logs l LEFT JOIN tasks t ON t.task_id = l.task_id
 WHERE l.task_id = $1 AND l.run_id = $2

-- name: expired_live_logs
SELECT task_id, run_id FROM live_logs WHERE expires < $1 ORDER BY expires LIMIT $2

-- name: delete_live_log_chunks
-- At most $3 chunks at a time, so sweeping a long log never makes one huge transaction.
DELETE FROM live_log_chunks
 WHERE task_id = $1 AND run_id = $2
   AND byte_offset IN (SELECT byte_offset FROM live_log_chunks
                        WHERE task_id = $1 AND run_id = $2 ORDER BY byte_offset LIMIT $3)

-- name: delete_live_log
DELETE FROM live_logs WHERE task_id = $1 AND run_id = $2

-- name: consistency_tasks
-- queue/consistency.py reads everything once, to check the rules committed states keep.
SELECT task_id, task_queue_id, state, runs, deadline, taken_until, claimed_at, ever_resolved FROM tasks

-- name: consistency_pending_runs
SELECT task_id, run_id, task_queue_id FROM pending_runs

-- name: consistency_groups
SELECT task_group_id FROM task_groups

-- name: consistency_resolutions
SELECT id, task_id FROM task_resolutions

-- name: consistency_outbox
SELECT id, exchange, routing_key, cc, body FROM unpublished_events ORDER BY id

-- name: schema_versions
-- The migrations a database has applied, oldest first (`taskyard migrate` reports them).
SELECT version, name, applied FROM schema_migrations ORDER BY version


-- ---------------------------------------------------------------------------------------------
-- The poll protocol's messages (queue/poll.py): Azure-queue messages, one per pending run.

-- name: insert_poll_message
INSERT INTO poll_messages (message_id, queue_name, task_id, run_id, inserted, expires, visible, dequeue_count)
VALUES (:message_id, :queue_name, :task_id, :run_id, :inserted, :expires, :inserted, 0)

-- name: peek_poll_messages
-- The next visible messages of a queue, with their task's state, runs and priority (NULL: the task is gone).
SELECT m.*, t.state, t.runs, t.priority, t.task_queue_id FROM poll_messages m LEFT JOIN tasks t ON t.task_id = m.task_id
 WHERE m.queue_name = $1 AND m.visible <= $2 AND m.expires > $2
 ORDER BY m.visible, m.inserted, m.message_id
 LIMIT $3

-- name: poll_queue_next_visible
-- When the queue's next message becomes (or became) visible; NULL if it has none.
SELECT min(visible) FROM poll_messages WHERE queue_name = $1 AND expires > $2

-- name: receive_poll_message
UPDATE poll_messages
   SET visible = :visible, pop_receipt = :pop_receipt, dequeue_count = dequeue_count + 1
 WHERE message_id = :message_id

-- name: get_poll_message_by_id
SELECT * FROM poll_messages WHERE message_id = $1

-- name: lock_poll_messages
-- The next visible messages of a queue, locked (on PostgreSQL those another receiver holds are
-- skipped), so two receivers never get the same message. With their task's state and runs (NULL:
-- gone).
SELECT m.*, t.state, t.runs, t.priority, t.task_queue_id FROM poll_messages m LEFT JOIN tasks t ON t.task_id = m.task_id
 WHERE m.queue_name = $1 AND m.visible <= $2 AND m.expires > $2
 ORDER BY m.visible, m.inserted, m.message_id
 LIMIT $3
   {{for_update_of_skip_locked(m)}}

-- name: get_poll_message_for_update
SELECT * FROM poll_messages WHERE message_id = $1 AND queue_name = $2 AND expires > $3 {{for_update}}

-- name: delete_poll_message
DELETE FROM poll_messages WHERE message_id = $1

-- name: delete_held_poll_message
DELETE FROM poll_messages WHERE message_id = $1 AND queue_name = $2 AND pop_receipt = $3

-- name: update_poll_message
UPDATE poll_messages SET visible = $2, pop_receipt = $3 WHERE message_id = $1 AND pop_receipt = $4

-- name: expire_poll_messages
DELETE FROM poll_messages WHERE expires < $1

-- name: any_poll_message
SELECT 1 FROM poll_messages LIMIT 1

-- name: pending_runs_after
-- The pending runs, in task order, for the poll messages' backfill.
SELECT t.*, p.run_id AS pending_run_id FROM pending_runs p JOIN tasks t ON t.task_id = p.task_id
 WHERE p.task_id > $1
 ORDER BY p.task_id
 LIMIT $2

-- The task-graph scheduler ------------------------------------------------------------------

-- name: insert_task_graph
INSERT INTO task_graphs (task_graph_id, scheduler_id, state, routing, scopes, routes, metadata, tags,
                         body, blocked_by, tasks_left, task_count, created, expires)
VALUES (:task_graph_id, :scheduler_id, 'running', :routing, :scopes, :routes, :metadata, :tags,
        :body, NULL, :tasks_left, :tasks_left, :created, :expires)

-- name: get_task_graph
SELECT * FROM task_graphs WHERE task_graph_id = $1

-- name: lock_task_graph
SELECT * FROM task_graphs WHERE task_graph_id = $1 {{for_update}}

-- name: task_graph_tasks
-- A graph's tasks with their queue state, definition and runs, in the order they were given.
SELECT g.*, t.state, t.definition, t.runs FROM task_graph_tasks g LEFT JOIN tasks t ON t.task_id = g.task_id
 WHERE g.task_graph_id = $1 ORDER BY g.position

-- name: task_graph_task_ids
-- A graph's taskIds, with the label of each that has one (extendTaskGraph's label form names them).
SELECT task_id, label FROM task_graph_tasks WHERE task_graph_id = $1

-- name: task_graph_task
SELECT g.*, t.state, t.definition, t.runs FROM task_graph_tasks g LEFT JOIN tasks t ON t.task_id = g.task_id
 WHERE g.task_graph_id = $1 AND g.task_id = $2

-- name: graph_of_task
SELECT task_graph_id FROM task_graph_tasks WHERE task_id = $1

-- name: count_task_graph_completion
-- Count a task's completion once; 1 when this call counted it.
UPDATE task_graph_tasks SET completed = TRUE WHERE task_id = $1 AND NOT completed

-- name: use_task_graph_rerun
UPDATE task_graph_tasks SET reruns_left = reruns_left - 1 WHERE task_id = $1 AND reruns_left > 0

-- name: task_graph_task_done
UPDATE task_graphs SET tasks_left = tasks_left - 1 WHERE task_graph_id = $1

-- name: add_task_graph_tasks
UPDATE task_graphs SET tasks_left = tasks_left + $2, task_count = task_count + $2,
       expires = CASE WHEN expires < $3 THEN $3 ELSE expires END
 WHERE task_graph_id = $1

-- name: set_task_graph_state
-- Leave `running` for `blocked` or `finished`; 1 when this call did it.
UPDATE task_graphs SET state = $2, blocked_by = $3 WHERE task_graph_id = $1 AND state = 'running'

-- name: task_graph_tasks_to_look_at
-- Tasks of running graphs whose resolution the scheduler has not acted on: the safety net
-- for events it missed.
SELECT g.task_id FROM task_graphs gr
  JOIN task_graph_tasks g ON g.task_graph_id = gr.task_graph_id
  JOIN tasks t ON t.task_id = g.task_id
 WHERE gr.state = 'running'
   AND ((t.state = 'completed' AND NOT g.completed) OR t.state IN ('failed', 'exception'))
 LIMIT $1

-- name: ui_dashboard_recent_groups
-- The task groups of the $1 most recently created tasks, the most recent first, at most $2.
SELECT task_group_id, max(created) AS latest
  FROM (SELECT task_group_id, created FROM tasks ORDER BY created DESC LIMIT $1) AS newest
 GROUP BY task_group_id
 ORDER BY latest DESC, task_group_id
 LIMIT $2

-- name: ui_dashboard_group_states
-- How many tasks of each group in $1 are in each state.
SELECT task_group_id, state, count(*) AS tasks FROM tasks
 WHERE task_group_id {{in_texts($1)}}
 GROUP BY task_group_id, state

-- name: ui_dashboard_recent_events
-- The $1 events published last, the newest first (the log's own order: its ids).
SELECT l.published, o.exchange, o.routing_key FROM event_log l JOIN outbox o ON o.id = l.event
 ORDER BY l.id DESC LIMIT $1

-- name: ui_dashboard_workers
-- Per task queue: its live workers, and how many of them are quarantined at $1; at most $2 queues.
SELECT task_queue_id, count(*) AS workers,
       sum(CASE WHEN quarantine_until > $1 THEN 1 ELSE 0 END) AS quarantined
  FROM workers
 WHERE expires > $1 OR quarantine_until > $1
 GROUP BY task_queue_id
 ORDER BY task_queue_id
 LIMIT $2

-- name: ui_dashboard_quarantined
-- Workers quarantined at $1, by task queue, at most $2.
SELECT task_queue_id, worker_group, worker_id, quarantine_until FROM workers
 WHERE quarantine_until > $1
 ORDER BY task_queue_id, worker_group, worker_id
 LIMIT $2

-- name: ui_workers_all
-- Every live worker (or quarantined at $1) of every task queue, at most $2.
SELECT * FROM workers
 WHERE expires > $1 OR quarantine_until > $1
 ORDER BY task_queue_id, worker_group, worker_id
 LIMIT $2

-- name: ui_session_insert
INSERT INTO ui_sessions (session_hash, client_id, sealed_token, certificate, csrf, created, expires)
VALUES (:session_hash, :client_id, :sealed_token, :certificate, :csrf, :created, :expires)

-- name: ui_session_get
SELECT * FROM ui_sessions WHERE session_hash = $1

-- name: ui_session_delete
DELETE FROM ui_sessions WHERE session_hash = $1

-- name: ui_session_sweep
-- Up to $2 sessions that expired before $1; each sign-in runs it, so expired rows never pile up.
DELETE FROM ui_sessions
 WHERE session_hash IN (SELECT session_hash FROM ui_sessions WHERE expires < $1 LIMIT $2)

-- name: ui_task_artifacts
-- The task page's artifacts: every run's, the latest run's first (bounded by $2); `uploading`: an
-- s3 artifact whose upload this server has not recorded (its token is still open).
SELECT run_id, name, storage_type, content_type, expires, details, present,
       upload_token IS NOT NULL AS uploading FROM artifacts
 WHERE task_id = $1
 ORDER BY run_id DESC, name
 LIMIT $2
-- name: ui_group_counts
-- The web UI's group page: how many of the group's tasks are in each state.
SELECT state, count(*) AS n FROM tasks WHERE task_group_id = $1 GROUP BY state

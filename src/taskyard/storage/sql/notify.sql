-- The notify service's queries (notify/).

-- name: notify_cursor
-- How far the notifier has read the event log, locked: one notifier at a time across the
-- deployment (on PostgreSQL; the others wait, then read where it left).
SELECT through FROM notify_cursor {{for_update}}

-- name: move_notify_cursor
UPDATE notify_cursor SET through = $1

-- name: notify_task_events
-- The task events CC'd to a `notify.` route, logged after id $1 up to id $2, in log order; at
-- most $3.
SELECT l.id, o.exchange, o.body, o.cc FROM event_log l JOIN outbox o ON o.id = l.event
 WHERE l.id > $1 AND l.id <= $2
   AND o.exchange IN ('task-defined', 'task-pending', 'task-running', 'task-completed', 'task-failed', 'task-exception')
   AND o.cc LIKE '%"route.notify.%'
 ORDER BY l.id LIMIT $3

-- name: record_notify_delivery
-- A notification to send, once per (event, route): recorded again (a batch read twice), it stays.
INSERT INTO notify_deliveries (event_id, route, task_id, status, outcome, detail, attempts, next_try, created)
VALUES (:event_id, :route, :task_id, :status, :outcome, :detail, 0, :now, :now)
ON CONFLICT (event_id, route) DO NOTHING

-- name: due_notify_deliveries
-- Pending notifications due at $1, oldest first; at most $2.
SELECT event_id, route, task_id, status, attempts FROM notify_deliveries
 WHERE outcome = 'pending' AND next_try <= $1
 ORDER BY event_id, route LIMIT $2

-- name: settle_notify_delivery
-- The notification ($1, $2) is done: outcome $3, detail $4; only while it was pending.
UPDATE notify_deliveries SET outcome = $3, detail = $4, attempts = attempts + 1
 WHERE event_id = $1 AND route = $2 AND outcome = 'pending'

-- name: retry_notify_delivery
-- The notification ($1, $2) failed this time ($3 says why): tried again from $4.
UPDATE notify_deliveries SET detail = $3, attempts = attempts + 1, next_try = $4
 WHERE event_id = $1 AND route = $2 AND outcome = 'pending'

-- name: task_notify_deliveries
-- The notifications recorded for task $1, in log order.
SELECT event_id, route, outcome, detail, attempts FROM notify_deliveries
 WHERE task_id = $1 ORDER BY event_id, route

-- name: expire_notify_deliveries
-- Up to $2 settled notifications recorded before $1.
DELETE FROM notify_deliveries WHERE (event_id, route) IN
    (SELECT event_id, route FROM notify_deliveries WHERE outcome <> 'pending' AND created < $1 LIMIT $2)

-- name: add_denylist_address
INSERT INTO notify_denylist (notification_type, notification_address) VALUES ($1, $2)
ON CONFLICT (notification_type, notification_address) DO NOTHING

-- name: delete_denylist_address
DELETE FROM notify_denylist WHERE notification_type = $1 AND notification_address = $2

-- name: is_denylisted
SELECT 1 FROM notify_denylist WHERE notification_type = $1 AND notification_address = $2

-- name: list_denylist
-- The denylisted addresses after ($1, $2) in (type, address) order; at most $3.
SELECT notification_type, notification_address FROM notify_denylist
 WHERE notification_type > $1 OR (notification_type = $1 AND notification_address > $2)
 ORDER BY notification_type, notification_address LIMIT $3

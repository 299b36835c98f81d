-- The worker-manager's queries (src/taskyard/pools/).

-- name: _pool_columns
worker_pool_id, provider_id, previous_provider_ids, description, config, owner, email_on_error,
       created, last_modified

-- name: insert_worker_pool
INSERT INTO worker_pools (worker_pool_id, provider_id, previous_provider_ids, description, config,
                          owner, email_on_error, created, last_modified)
VALUES (:worker_pool_id, :provider_id, '[]', :description, :config, :owner, :email_on_error, :now, :now)
ON CONFLICT (worker_pool_id) DO NOTHING

-- name: get_worker_pool
SELECT {{_pool_columns}} FROM worker_pools WHERE worker_pool_id = $1

-- name: lock_worker_pool
SELECT {{_pool_columns}} FROM worker_pools WHERE worker_pool_id = $1 {{for_update}}

-- name: update_worker_pool
UPDATE worker_pools
   SET provider_id = :provider_id, previous_provider_ids = :previous_provider_ids,
       description = :description, config = :config, owner = :owner,
       email_on_error = :email_on_error, last_modified = :now
 WHERE worker_pool_id = :worker_pool_id

-- name: list_worker_pools
SELECT {{_pool_columns}} FROM worker_pools WHERE worker_pool_id > $1 ORDER BY worker_pool_id LIMIT $2

-- The pools a provider runs.
-- name: worker_pools_of_provider
SELECT {{_pool_columns}} FROM worker_pools WHERE provider_id = $1 ORDER BY worker_pool_id

-- Per pool and state: how many workers, and their capacity (the pools from the first id to the last).
-- name: worker_pool_counts
SELECT worker_pool_id, state, count(*) AS workers, sum(capacity) AS capacity
  FROM pool_workers
 WHERE worker_pool_id >= $1 AND worker_pool_id <= $2
 GROUP BY worker_pool_id, state

-- A deleted pool (null-provider) goes once no worker of it remains but stopped ones, which go
-- with it.
-- name: delete_worker_pool
DELETE FROM worker_pools
 WHERE worker_pool_id = $1 AND provider_id = 'null-provider'
   AND NOT EXISTS (SELECT 1 FROM pool_workers
                    WHERE worker_pool_id = $1 AND state <> 'stopped')

-- name: delete_stopped_workers_of_pool
DELETE FROM pool_workers WHERE worker_pool_id = $1 AND state = 'stopped'

-- name: deleted_worker_pools
SELECT worker_pool_id FROM worker_pools WHERE provider_id = 'null-provider' ORDER BY worker_pool_id

-- name: _worker_columns
worker_pool_id, worker_group, worker_id, provider_id, state, capacity, created, expires,
       last_modified, last_checked, static_secret, registration_secret, provider_data

-- name: insert_pool_worker
INSERT INTO pool_workers (worker_pool_id, worker_group, worker_id, provider_id, state, capacity,
                          created, expires, last_modified, last_checked, static_secret,
                          registration_secret, provider_data)
VALUES (:worker_pool_id, :worker_group, :worker_id, :provider_id, :state, :capacity, :now,
        :expires, :now, :now, :static_secret, '', :provider_data)
ON CONFLICT (worker_pool_id, worker_group, worker_id) DO NOTHING

-- name: get_pool_worker
SELECT {{_worker_columns}} FROM pool_workers
 WHERE worker_pool_id = $1 AND worker_group = $2 AND worker_id = $3

-- name: lock_pool_worker
SELECT {{_worker_columns}} FROM pool_workers
 WHERE worker_pool_id = $1 AND worker_group = $2 AND worker_id = $3 {{for_update}}

-- name: update_pool_worker
UPDATE pool_workers
   SET state = :state, capacity = :capacity, expires = :expires, static_secret = :static_secret,
       registration_secret = :registration_secret, provider_data = :provider_data,
       last_modified = :now, last_checked = :now
 WHERE worker_pool_id = :worker_pool_id AND worker_group = :worker_group AND worker_id = :worker_id

-- name: list_pool_workers
SELECT {{_worker_columns}} FROM pool_workers
 WHERE worker_pool_id = $1 AND ($2 = '' OR state = $2)
   AND (worker_group > $3 OR (worker_group = $3 AND worker_id > $4))
 ORDER BY worker_group, worker_id LIMIT $5

-- name: list_pool_workers_in_group
SELECT {{_worker_columns}} FROM pool_workers
 WHERE worker_pool_id = $1 AND worker_group = $2 AND worker_id > $3
 ORDER BY worker_id LIMIT $4

-- A provider's workers that are not stopped, of every pool.
-- name: live_workers_of_provider
SELECT {{_worker_columns}} FROM pool_workers
 WHERE provider_id = $1 AND state <> 'stopped'
 ORDER BY worker_pool_id, worker_group, worker_id

-- Stopped workers past their expiry (the rest are kept alive by their provider).
-- name: expire_pool_workers
DELETE FROM pool_workers
 WHERE state = 'stopped' AND expires < $1
   AND (worker_pool_id, worker_group, worker_id) IN (
       SELECT worker_pool_id, worker_group, worker_id FROM pool_workers
        WHERE state = 'stopped' AND expires < $1 ORDER BY expires LIMIT $2)

-- name: insert_pool_error
INSERT INTO worker_pool_errors (error_id, worker_pool_id, reported, kind, title, description, extra,
                                worker_group, worker_id)
VALUES (:error_id, :worker_pool_id, :reported, :kind, :title, :description, :extra, :worker_group,
        :worker_id)

-- Newest first.
-- name: list_pool_errors
SELECT error_id, worker_pool_id, reported, kind, title, description, extra, worker_group, worker_id
  FROM worker_pool_errors
 WHERE worker_pool_id = $1 AND ($2 = '' OR error_id = $2)
   AND (reported < $3 OR (reported = $3 AND error_id < $4))
 ORDER BY reported DESC, error_id DESC LIMIT $5

-- name: expire_pool_errors
DELETE FROM worker_pool_errors
 WHERE error_id IN (SELECT error_id FROM worker_pool_errors WHERE reported < $1
                     ORDER BY reported LIMIT $2)

-- A pool's task queue: its pending runs and its running tasks, read in one statement so that both
-- counts are of one moment (a claim between two reads would count its run in neither, or in
-- both, and start a worker no task needs).
-- name: pool_queue_counts
SELECT (SELECT count(*) FROM pending_runs WHERE task_queue_id = $1) AS pending,
       (SELECT count(*) FROM tasks WHERE task_queue_id = $1 AND state = 'running') AS claimed

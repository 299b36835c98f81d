-- The worker-manager (src/taskyard/pools/): worker pools, their workers and their errors.
-- A pool's id is its task queue id. `config` is the provider's configuration as JSON text;
-- `previous_provider_ids` a JSON list of the providers that ran it before. Instants are BIGINT
-- epoch milliseconds.
CREATE TABLE worker_pools (
    worker_pool_id         TEXT PRIMARY KEY,
    provider_id            TEXT NOT NULL,
    previous_provider_ids  TEXT NOT NULL,
    description            TEXT NOT NULL,
    config                 TEXT NOT NULL,
    owner                  TEXT NOT NULL,
    email_on_error         BOOLEAN NOT NULL,
    created                BIGINT NOT NULL,
    last_modified          BIGINT NOT NULL
);

-- A pool's workers as the worker-manager knows them (the queue's `workers` table is what claims
-- saw). `state` is requested, running, stopping or stopped. `static_secret` and
-- `registration_secret` are SHA-256 digests (hex) of the secrets, never the secrets: a
-- registration only compares. `provider_data` is the provider's JSON (the local provider's
-- host and process id).
CREATE TABLE pool_workers (
    worker_pool_id       TEXT NOT NULL,
    worker_group         TEXT NOT NULL,
    worker_id            TEXT NOT NULL,
    provider_id          TEXT NOT NULL,
    state                TEXT NOT NULL,
    capacity             INTEGER NOT NULL,
    created              BIGINT NOT NULL,
    expires              BIGINT NOT NULL,
    last_modified        BIGINT NOT NULL,
    last_checked         BIGINT NOT NULL,
    static_secret        TEXT NOT NULL,
    registration_secret  TEXT NOT NULL,
    provider_data        TEXT NOT NULL,
    PRIMARY KEY (worker_pool_id, worker_group, worker_id)
);
CREATE INDEX pool_workers_by_state ON pool_workers (provider_id, state);
CREATE INDEX pool_workers_expires ON pool_workers (expires);

-- What workers and providers reported going wrong in a pool; kept a week.
CREATE TABLE worker_pool_errors (
    error_id        TEXT PRIMARY KEY,
    worker_pool_id  TEXT NOT NULL,
    reported        BIGINT NOT NULL,
    kind            TEXT NOT NULL,
    title           TEXT NOT NULL,
    description     TEXT NOT NULL,
    extra           TEXT NOT NULL,
    worker_group    TEXT NOT NULL,
    worker_id       TEXT NOT NULL
);
CREATE INDEX worker_pool_errors_by_pool ON worker_pool_errors (worker_pool_id, reported, error_id);
CREATE INDEX worker_pool_errors_reported ON worker_pool_errors (reported);

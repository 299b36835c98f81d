-- The queue's tables. Every instant is BIGINT epoch milliseconds; JSON is stored as text.
-- Dialect words are written as {{BIGSERIAL}}, replaced at load (storage/_queries.py, WORDS).

CREATE TABLE tasks (
    task_id        TEXT PRIMARY KEY,
    task_group_id  TEXT NOT NULL,
    scheduler_id   TEXT NOT NULL,
    project_id     TEXT NOT NULL,
    task_queue_id  TEXT NOT NULL,
    priority       TEXT NOT NULL,
    requires       TEXT NOT NULL,
    retries_left   INTEGER NOT NULL,
    created        BIGINT NOT NULL,
    deadline       BIGINT NOT NULL,
    expires        BIGINT NOT NULL,
    definition     TEXT NOT NULL,
    runs           TEXT NOT NULL,
    -- last run's state, or 'unscheduled': kept beside runs so the resolvers can use indexes
    state          TEXT NOT NULL,
    taken_until    BIGINT,
    claimed_at     BIGINT,
    ever_resolved  BOOLEAN NOT NULL DEFAULT FALSE,
    -- bumped by every transition; updates compare it so racing writers cannot both win
    version        INTEGER NOT NULL
);
CREATE INDEX tasks_by_group ON tasks (task_group_id, task_id);
CREATE INDEX tasks_unresolved_by_group ON tasks (task_group_id) WHERE NOT ever_resolved;
CREATE INDEX tasks_claims ON tasks (taken_until) WHERE state = 'running';
CREATE INDEX tasks_claimed_by_queue ON tasks (task_queue_id, claimed_at) WHERE state = 'running';
CREATE INDEX tasks_open_deadlines ON tasks (deadline) WHERE state IN ('unscheduled', 'pending', 'running');
CREATE INDEX tasks_expires ON tasks (expires);

-- One row per pending run: the claim index. A claimed run leaves it.
CREATE TABLE pending_runs (
    task_id        TEXT NOT NULL,
    run_id         INTEGER NOT NULL,
    task_queue_id  TEXT NOT NULL,
    priority       INTEGER NOT NULL,
    inserted       BIGINT NOT NULL,
    deadline       BIGINT NOT NULL,
    PRIMARY KEY (task_id, run_id)
);
CREATE INDEX pending_runs_claim_order ON pending_runs (task_queue_id, priority DESC, inserted, task_id);

CREATE TABLE task_dependencies (
    required_task_id   TEXT NOT NULL,
    dependent_task_id  TEXT NOT NULL,
    requires           TEXT NOT NULL,
    satisfied          BOOLEAN NOT NULL,
    expires            BIGINT NOT NULL,
    PRIMARY KEY (required_task_id, dependent_task_id)
);
CREATE INDEX task_dependencies_open ON task_dependencies (dependent_task_id) WHERE NOT satisfied;
CREATE INDEX task_dependencies_expires ON task_dependencies (expires);

-- Final resolutions waiting for the dependency resolver.
CREATE TABLE task_resolutions (
    id             {{BIGSERIAL}},
    task_id        TEXT NOT NULL,
    task_group_id  TEXT NOT NULL,
    resolution     TEXT NOT NULL
);

CREATE TABLE task_groups (
    task_group_id  TEXT PRIMARY KEY,
    scheduler_id   TEXT NOT NULL,
    expires        BIGINT NOT NULL,
    sealed         BIGINT
);
CREATE INDEX task_groups_expires ON task_groups (expires);

CREATE TABLE task_queues (
    task_queue_id     TEXT PRIMARY KEY,
    expires           BIGINT NOT NULL,
    last_date_active  BIGINT NOT NULL,
    description       TEXT NOT NULL DEFAULT '',
    stability         TEXT NOT NULL DEFAULT 'experimental'
);

CREATE TABLE workers (
    task_queue_id       TEXT NOT NULL,
    worker_group        TEXT NOT NULL,
    worker_id           TEXT NOT NULL,
    first_claim         BIGINT NOT NULL,
    last_date_active    BIGINT,
    expires             BIGINT NOT NULL,
    quarantine_until    BIGINT,
    quarantine_details  TEXT NOT NULL DEFAULT '[]',
    recent_tasks        TEXT NOT NULL DEFAULT '[]',
    PRIMARY KEY (task_queue_id, worker_group, worker_id)
);

-- Events written in the transaction of the change they announce; relayed after commit.
CREATE TABLE outbox (
    id           {{BIGSERIAL}},
    exchange     TEXT NOT NULL,
    routing_key  TEXT NOT NULL,
    cc           TEXT NOT NULL,
    body         TEXT NOT NULL
);

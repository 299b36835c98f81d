-- The hooks service (src/taskyard/hooks/). A hook's definition is kept as JSON texts, one column
-- per part, as createHook stored it. `trigger_token` opens triggerHookWithToken, stored sealed as
-- the secrets service seals values (`<key id>:<AES-256-GCM sealed text>`); `next_task_id`
-- is the taskId of the next scheduled fire, chosen before it and never shown, so that a fire
-- retried after a crash creates the same task; `next_scheduled_date` is that fire's time (a far
-- future for a hook with no schedule). Instants are BIGINT epoch milliseconds.
CREATE TABLE hooks (
    hook_group_id        TEXT NOT NULL,
    hook_id              TEXT NOT NULL,
    metadata             TEXT NOT NULL,
    task                 TEXT NOT NULL,
    schedule             TEXT NOT NULL,
    bindings             TEXT NOT NULL,
    trigger_schema       TEXT NOT NULL,
    trigger_token        TEXT NOT NULL,
    next_task_id         TEXT NOT NULL,
    next_scheduled_date  BIGINT NOT NULL,
    created              BIGINT NOT NULL,
    last_modified        BIGINT NOT NULL,
    PRIMARY KEY (hook_group_id, hook_id)
);
CREATE INDEX hooks_next_scheduled ON hooks (next_scheduled_date);

-- Every fire of a hook that created a task or failed to: one row per taskId.
CREATE TABLE hook_last_fires (
    hook_group_id     TEXT NOT NULL,
    hook_id           TEXT NOT NULL,
    task_id           TEXT NOT NULL,
    fired_by          TEXT NOT NULL,
    task_create_time  BIGINT NOT NULL,
    result            TEXT NOT NULL,
    error             TEXT NOT NULL,
    PRIMARY KEY (hook_group_id, hook_id, task_id)
);
CREATE INDEX hook_last_fires_by_time ON hook_last_fires (hook_group_id, hook_id, task_create_time, task_id);
CREATE INDEX hook_last_fires_expiry ON hook_last_fires (task_create_time);

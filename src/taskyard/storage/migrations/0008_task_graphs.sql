-- The task-graph scheduler's tables. A graph's tasks are queue tasks (`tasks`) too: their states
-- are read from there; these rows hold what only the scheduler knows about them.
CREATE TABLE task_graphs (
    task_graph_id  TEXT PRIMARY KEY,
    scheduler_id   TEXT NOT NULL,
    -- running | blocked | finished
    state          TEXT NOT NULL,
    -- the label form's graph routing; '' when none
    routing        TEXT NOT NULL,
    scopes         TEXT NOT NULL,
    routes         TEXT NOT NULL,
    metadata       TEXT NOT NULL,
    tags           TEXT NOT NULL,
    -- the create request as checked, compared when the same graph id is created again
    body           TEXT NOT NULL,
    -- the task that blocked the graph
    blocked_by     TEXT,
    -- how many of its tasks have not completed yet: 0 finishes the graph
    tasks_left     INTEGER NOT NULL,
    task_count     INTEGER NOT NULL,
    created        BIGINT NOT NULL
);
CREATE INDEX task_graphs_running ON task_graphs (task_graph_id) WHERE state = 'running';

CREATE TABLE task_graph_tasks (
    task_id        TEXT PRIMARY KEY,
    task_graph_id  TEXT NOT NULL,
    -- the order tasks were given in, across create and extend
    position       INTEGER NOT NULL,
    label          TEXT,
    -- JSON list of the taskIds this task requires
    requires       TEXT NOT NULL,
    reruns         INTEGER NOT NULL,
    reruns_left    INTEGER NOT NULL,
    -- set once the scheduler counted the task's completion
    completed      BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX task_graph_tasks_by_graph ON task_graph_tasks (task_graph_id, position);

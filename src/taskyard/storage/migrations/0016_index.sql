-- The index service: tasks indexed under dot-separated paths, and the namespaces above them.
-- An entry is keyed by its path split at the last dot (namespace '' at the root), so findTask is
-- one primary-key lookup and listTasks a range of it. A namespace row (parent, name) exists for
-- every prefix of an entry's namespace; it expires when the last entry it held would (rounded up
-- to a day), and is swept after that, as entries are. Dates are epoch ms, as everywhere.
CREATE TABLE indexed_tasks (
    namespace  TEXT NOT NULL,
    name       TEXT NOT NULL,
    rank       BIGINT NOT NULL,
    task_id    TEXT NOT NULL,
    data       TEXT NOT NULL,
    expires    BIGINT NOT NULL,
    PRIMARY KEY (namespace, name)
);
CREATE INDEX indexed_tasks_expires ON indexed_tasks (expires);

CREATE TABLE index_namespaces (
    parent   TEXT NOT NULL,
    name     TEXT NOT NULL,
    expires  BIGINT NOT NULL,
    PRIMARY KEY (parent, name)
);
CREATE INDEX index_namespaces_expires ON index_namespaces (expires);

-- How far the indexer has read the event log: every task-completed event up to `through` has been
-- indexed. Moved in the transaction that indexes those events, so none is lost or done twice.
CREATE TABLE index_cursor (
    through  BIGINT NOT NULL
);
INSERT INTO index_cursor (through) VALUES (0);

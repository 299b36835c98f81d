-- When a task graph may be deleted (epoch ms): the latest expiry of its tasks, raised when the graph
-- is extended. The expiry sweep deletes the graph and its task rows once that has passed, as it
-- deletes the tasks themselves; before, graphs were kept for ever.
ALTER TABLE task_graphs ADD COLUMN expires BIGINT NOT NULL DEFAULT 0;
-- A graph made before this migration: its tasks' latest expiry; 0 (swept next) if they are gone.
UPDATE task_graphs SET expires = COALESCE(
    (SELECT MAX(t.expires) FROM task_graph_tasks g JOIN tasks t ON t.task_id = g.task_id
      WHERE g.task_graph_id = task_graphs.task_graph_id), 0);
CREATE INDEX task_graphs_expires ON task_graphs (expires);

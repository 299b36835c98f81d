-- The index service's queries in PostgreSQL's own forms.

-- name: index_cursor
-- Locked: one indexer at a time across the deployment; the others wait, then read where it left.
SELECT through FROM index_cursor FOR UPDATE

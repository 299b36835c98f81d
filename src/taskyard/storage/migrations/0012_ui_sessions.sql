-- The web UI's sessions (src/taskyard/ui/sessions.py). A row is keyed by the SHA-256 of a random
-- 256-bit session id that only the browser's cookie holds, so the table alone signs nobody in.
-- `sealed_token` is the access token the session signed in with, encrypted with a key derived from
-- that session id: every page and action checks the credentials again, as a Hawk request would be
-- checked, so a deleted, disabled or reset client, or an expired certificate, ends the session.
-- `certificate` is the temporary credentials' certificate (JSON text), NULL for a permanent client.
-- `expires` is epoch milliseconds, never later than the credentials' own expiry.
CREATE TABLE ui_sessions (
    session_hash  TEXT PRIMARY KEY,
    client_id     TEXT NOT NULL,
    sealed_token  TEXT NOT NULL,
    certificate   TEXT,
    csrf          TEXT NOT NULL,
    created       BIGINT NOT NULL,
    expires       BIGINT NOT NULL
);
CREATE INDEX ui_sessions_expires ON ui_sessions (expires);

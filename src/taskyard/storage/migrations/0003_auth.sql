-- The auth service's clients and roles. Instants are BIGINT epoch milliseconds; JSON is text.
-- Access tokens are never stored: a client's token is derived from the deployment's secret key
-- and its `token_salt`, so a new salt (resetAccessToken) revokes the old token.

CREATE TABLE clients (
    client_id             TEXT PRIMARY KEY,
    description           TEXT NOT NULL,
    scopes                TEXT NOT NULL,
    token_salt            TEXT NOT NULL,
    expires               BIGINT NOT NULL,
    disabled              BOOLEAN NOT NULL DEFAULT FALSE,
    delete_on_expiration  BOOLEAN NOT NULL DEFAULT FALSE,
    created               BIGINT NOT NULL,
    last_modified         BIGINT NOT NULL,
    last_date_used        BIGINT NOT NULL,
    last_rotated          BIGINT NOT NULL
);
CREATE INDEX clients_expires ON clients (expires) WHERE delete_on_expiration;

-- Role scopes are stored sorted, as TaskCluster stores them.
CREATE TABLE roles (
    role_id        TEXT PRIMARY KEY,
    description    TEXT NOT NULL,
    scopes         TEXT NOT NULL,
    created        BIGINT NOT NULL,
    last_modified  BIGINT NOT NULL
);

-- One row. Every change to clients or roles bumps `generation` in its own transaction (which
-- also serialises those changes); processes compare it to know when their caches are stale.
-- `secret_check` is a MAC made with the secret key of the first process that started, so a
-- process started with a different key refuses to start instead of minting useless tokens.
CREATE TABLE auth_generation (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    generation    BIGINT NOT NULL,
    secret_check  TEXT
);
INSERT INTO auth_generation (id, generation, secret_check) VALUES (1, 0, NULL);

-- A new deployment's anonymous role: every caller may read public artifacts, nothing more.
INSERT INTO roles (role_id, description, scopes, created, last_modified)
VALUES ('anonymous', 'Scopes every caller holds, signed or not: read public artifacts.',
        '["queue:get-artifact:public/*"]', {{NOW_MS}}, {{NOW_MS}});

-- The secrets service's values (src/taskyard/secrets/). `sealed` is the value's JSON encrypted
-- with AES-256-GCM (nonce, ciphertext and tag, in base64), the secret's name as associated data;
-- `key_id` names the key that sealed it, a fingerprint of a key derived from the deployment's
-- secret key. No plaintext is stored. Instants are BIGINT epoch milliseconds.
CREATE TABLE secrets (
    name           TEXT PRIMARY KEY,
    key_id         TEXT NOT NULL,
    sealed         TEXT NOT NULL,
    expires        BIGINT NOT NULL,
    created        BIGINT NOT NULL,
    last_modified  BIGINT NOT NULL
);
CREATE INDEX secrets_expires ON secrets (expires);
CREATE INDEX secrets_key_id ON secrets (key_id);

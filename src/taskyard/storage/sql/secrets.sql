-- The secrets service's queries (src/taskyard/secrets/store.py).

-- name: set_secret
INSERT INTO secrets (name, key_id, sealed, expires, created, last_modified)
VALUES ($1, $2, $3, $4, $5, $5)
ON CONFLICT (name) DO UPDATE
   SET key_id = excluded.key_id, sealed = excluded.sealed, expires = excluded.expires,
       last_modified = excluded.last_modified
RETURNING created

-- name: get_secret
SELECT name, key_id, sealed, expires FROM secrets WHERE name = $1 AND expires >= $2

-- name: remove_secret
DELETE FROM secrets WHERE name = $1

-- name: list_secrets
SELECT name, expires FROM secrets WHERE name > $1 AND expires >= $2 ORDER BY name LIMIT $3

-- The outer `expires < $1` is checked again against a row a concurrent set renewed meanwhile.
-- name: expire_secrets
DELETE FROM secrets
 WHERE expires < $1
   AND name IN (SELECT name FROM secrets WHERE expires < $1 ORDER BY expires LIMIT $2)

-- name: secrets_sealed_with
SELECT name, key_id, sealed FROM secrets WHERE key_id = $1 ORDER BY name LIMIT $2

-- Only if the value is still the one read: a set meanwhile sealed a newer value, under the new key.
-- name: reseal_secret
UPDATE secrets SET key_id = $3, sealed = $4 WHERE name = $1 AND sealed = $2

-- The one upload an s3 artifact's PUT URL may still make on the local store: createArtifact
-- sets a fresh token for each URL it answers, and the first PUT stored under it clears it.
-- NULL: no PUT may write (already uploaded, or not an s3 artifact). URLs made before this
-- migration carry no token and are refused; the worker asks for a new one.
ALTER TABLE artifacts ADD COLUMN upload_token TEXT;

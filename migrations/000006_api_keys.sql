-- 000006_api_keys: API keys with scopes (docs/security.md).
--
-- A key is shown once, when it is made (`POST /admin/tokens`), and only its sha256 is kept:
-- the secret is 256 random bits, so a plain hash cannot be searched back to it. `scopes` is a
-- non-empty subset of submit, read, work, admin. Revoking sets revoked_at; every node re-reads
-- the live keys about twice a second, so a revoked key stops working everywhere within a second.
CREATE TABLE api_keys (
  key_id      uuid PRIMARY KEY,
  name        text NOT NULL,
  scopes      text[] NOT NULL,
  secret_hash text NOT NULL UNIQUE,
  created_at  timestamptz NOT NULL DEFAULT now(),
  revoked_at  timestamptz
);

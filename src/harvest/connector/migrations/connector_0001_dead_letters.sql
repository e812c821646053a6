-- The connector's default dead-letter destination: one row per poison
-- message, with everything an operator needs to replay it by hand.
CREATE TABLE harvest_connector_dead_letters (
  id              uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
  binding         text        NOT NULL,
  stream          text        NOT NULL,
  coordinates     text        NOT NULL,
  -- The message's dedupe key: dead-lettering the same message twice is a no-op.
  idempotency_key text        NOT NULL UNIQUE,
  reason          text        NOT NULL,
  detail          text        NOT NULL,
  attempts        integer     NOT NULL,
  payload         bytea       NOT NULL,
  failed_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX harvest_connector_dead_letters_triage
  ON harvest_connector_dead_letters (binding, reason, failed_at);

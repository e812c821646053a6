-- The connector module's tables as its migrations leave them (pg_dump --schema-only
-- of a freshly migrated database, normalised). Generated: do not edit; a
-- migration that changes the schema regenerates it with
--   HARVEST_UPDATE_SCHEMA=1 scripts/test.sh -R SchemaTest
-- and tests/plugin/schema_test.cpp fails while it is out of date.

CREATE TABLE public.harvest_connector_clusters (
    binding text NOT NULL,
    incarnation text NOT NULL,
    cluster_id text NOT NULL,
    recorded_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.harvest_connector_dead_letters (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    binding text NOT NULL,
    stream text NOT NULL,
    coordinates text NOT NULL,
    idempotency_key text NOT NULL,
    reason text NOT NULL,
    detail text NOT NULL,
    attempts integer NOT NULL,
    payload bytea NOT NULL,
    failed_at timestamp with time zone DEFAULT now() NOT NULL,
    replay_requested_at timestamp with time zone,
    replay_requested_by text,
    replayed_at timestamp with time zone,
    replay_outcome text,
    replay_detail text,
    replay_execution_id text,
    coordinates_structured jsonb,
    record_key bytea,
    headers jsonb,
    fingerprint bigint
);

ALTER TABLE ONLY public.harvest_connector_clusters
    ADD CONSTRAINT harvest_connector_clusters_pkey PRIMARY KEY (binding, incarnation);

ALTER TABLE ONLY public.harvest_connector_dead_letters
    ADD CONSTRAINT harvest_connector_dead_letters_idempotency_key_key UNIQUE (idempotency_key);

ALTER TABLE ONLY public.harvest_connector_dead_letters
    ADD CONSTRAINT harvest_connector_dead_letters_pkey PRIMARY KEY (id);

CREATE INDEX harvest_connector_dead_letters_failed ON public.harvest_connector_dead_letters USING btree (failed_at, id);

CREATE INDEX harvest_connector_dead_letters_replay_queue ON public.harvest_connector_dead_letters USING btree (binding, replay_requested_at) WHERE ((replay_requested_at IS NOT NULL) AND (replayed_at IS NULL));

CREATE INDEX harvest_connector_dead_letters_triage ON public.harvest_connector_dead_letters USING btree (binding, reason, failed_at);

-- The engine module's tables as its migrations leave them (pg_dump --schema-only
-- of a freshly migrated database, normalised). Generated: do not edit; a
-- migration that changes the schema regenerates it with
--   HARVEST_UPDATE_SCHEMA=1 scripts/test.sh -R SchemaTest
-- and tests/plugin/schema_test.cpp fails while it is out of date.

CREATE TABLE public.harvest_admission_throttle (
    workflow_name text NOT NULL,
    window_started_at timestamp with time zone NOT NULL,
    used integer NOT NULL
);

CREATE TABLE public.harvest_batch_items (
    id bigint NOT NULL,
    workflow_name text NOT NULL,
    input jsonb NOT NULL,
    start_source text NOT NULL,
    start_source_ref text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    workflow_id text,
    fired_execution uuid
);

CREATE SEQUENCE public.harvest_batch_items_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.harvest_batch_items_id_seq OWNED BY public.harvest_batch_items.id;

CREATE TABLE public.harvest_debounce (
    workflow_name text NOT NULL,
    workflow_id text NOT NULL,
    input jsonb NOT NULL,
    start_source text NOT NULL,
    start_source_ref text,
    fire_at timestamp with time zone NOT NULL,
    pending boolean DEFAULT true NOT NULL,
    fired_runs integer DEFAULT 0 NOT NULL
);

CREATE TABLE public.harvest_deferred_starts (
    id bigint NOT NULL,
    workflow_name text NOT NULL,
    workflow_id text,
    input jsonb NOT NULL,
    start_source text NOT NULL,
    start_source_ref text,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE SEQUENCE public.harvest_deferred_starts_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.harvest_deferred_starts_id_seq OWNED BY public.harvest_deferred_starts.id;

CREATE TABLE public.harvest_engine_dead_letters (
    execution_id uuid NOT NULL,
    workflow_name text NOT NULL,
    workflow_id text,
    error text NOT NULL,
    attempts integer NOT NULL,
    failed_at timestamp with time zone DEFAULT now() NOT NULL,
    replayed_at timestamp with time zone,
    reason text DEFAULT 'failed'::text NOT NULL
);

CREATE TABLE public.harvest_mutex_queue (
    name text NOT NULL,
    execution_id uuid NOT NULL,
    seq bigint NOT NULL,
    enqueued_at timestamp with time zone DEFAULT now() NOT NULL,
    granted_at timestamp with time zone
);

ALTER TABLE public.harvest_mutex_queue ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.harvest_mutex_queue_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.harvest_run_leases (
    execution_id uuid NOT NULL,
    workflow_name text NOT NULL,
    concurrency_key text,
    lease_owner text NOT NULL,
    lease_expires_at timestamp with time zone NOT NULL,
    claimed_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.harvest_signals (
    id bigint NOT NULL,
    execution_id uuid NOT NULL,
    name text NOT NULL,
    payload jsonb NOT NULL,
    idempotency_key text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    fingerprint bigint
);

CREATE SEQUENCE public.harvest_signals_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.harvest_signals_id_seq OWNED BY public.harvest_signals.id;

CREATE TABLE public.harvest_start_claims (
    workflow_name text NOT NULL,
    idempotency_key text NOT NULL,
    execution_id uuid NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.harvest_workflow_executions (
    id uuid NOT NULL,
    workflow_name text NOT NULL,
    workflow_id text,
    status text NOT NULL,
    input json NOT NULL,
    output jsonb,
    error text,
    start_source text NOT NULL,
    start_source_ref text,
    attempt integer DEFAULT 1 NOT NULL,
    max_attempts integer DEFAULT 3 NOT NULL,
    run_after timestamp with time zone DEFAULT now() NOT NULL,
    signal_seq bigint DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    completed_at timestamp with time zone,
    run_no integer DEFAULT 1 NOT NULL,
    superseded boolean DEFAULT false NOT NULL,
    entity_reuse boolean DEFAULT false NOT NULL,
    start_trace jsonb,
    cancel_requested_at timestamp with time zone,
    cancel_reason text,
    crash_count integer DEFAULT 0 NOT NULL,
    concurrency_key text,
    idempotency_key text,
    key_expires_at timestamp with time zone,
    key_fingerprint bigint,
    crash_mark bigint,
    CONSTRAINT harvest_workflow_executions_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'waiting'::text, 'completed'::text, 'failed'::text, 'cancelled'::text, 'terminated'::text])))
);

CREATE VIEW public.harvest_start_idempotency AS
 SELECT harvest_workflow_executions.workflow_name,
    harvest_workflow_executions.idempotency_key,
    harvest_workflow_executions.id AS execution_id,
    harvest_workflow_executions.key_expires_at AS expires_at,
    harvest_workflow_executions.created_at
   FROM public.harvest_workflow_executions
  WHERE ((harvest_workflow_executions.idempotency_key IS NOT NULL) AND (harvest_workflow_executions.key_expires_at > now()))
UNION ALL
 SELECT harvest_start_claims.workflow_name,
    harvest_start_claims.idempotency_key,
    harvest_start_claims.execution_id,
    harvest_start_claims.expires_at,
    harvest_start_claims.created_at
   FROM public.harvest_start_claims
  WHERE (harvest_start_claims.expires_at > now());

CREATE TABLE public.harvest_workflow_events (
    id bigint NOT NULL,
    execution_id uuid NOT NULL,
    op_seq integer,
    kind text NOT NULL,
    name text,
    payload jsonb,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE SEQUENCE public.harvest_workflow_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.harvest_workflow_events_id_seq OWNED BY public.harvest_workflow_events.id;

ALTER TABLE ONLY public.harvest_batch_items ALTER COLUMN id SET DEFAULT nextval('public.harvest_batch_items_id_seq'::regclass);

ALTER TABLE ONLY public.harvest_deferred_starts ALTER COLUMN id SET DEFAULT nextval('public.harvest_deferred_starts_id_seq'::regclass);

ALTER TABLE ONLY public.harvest_signals ALTER COLUMN id SET DEFAULT nextval('public.harvest_signals_id_seq'::regclass);

ALTER TABLE ONLY public.harvest_workflow_events ALTER COLUMN id SET DEFAULT nextval('public.harvest_workflow_events_id_seq'::regclass);

ALTER TABLE ONLY public.harvest_admission_throttle
    ADD CONSTRAINT harvest_admission_throttle_pkey PRIMARY KEY (workflow_name);

ALTER TABLE ONLY public.harvest_batch_items
    ADD CONSTRAINT harvest_batch_items_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.harvest_debounce
    ADD CONSTRAINT harvest_debounce_pkey PRIMARY KEY (workflow_name, workflow_id);

ALTER TABLE ONLY public.harvest_deferred_starts
    ADD CONSTRAINT harvest_deferred_starts_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.harvest_deferred_starts
    ADD CONSTRAINT harvest_deferred_starts_workflow_name_workflow_id_key UNIQUE (workflow_name, workflow_id);

ALTER TABLE ONLY public.harvest_engine_dead_letters
    ADD CONSTRAINT harvest_engine_dead_letters_pkey PRIMARY KEY (execution_id);

ALTER TABLE ONLY public.harvest_mutex_queue
    ADD CONSTRAINT harvest_mutex_queue_pkey PRIMARY KEY (name, execution_id);

ALTER TABLE ONLY public.harvest_run_leases
    ADD CONSTRAINT harvest_run_leases_pkey PRIMARY KEY (execution_id);

ALTER TABLE ONLY public.harvest_signals
    ADD CONSTRAINT harvest_signals_execution_id_idempotency_key_key UNIQUE (execution_id, idempotency_key);

ALTER TABLE ONLY public.harvest_signals
    ADD CONSTRAINT harvest_signals_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.harvest_start_claims
    ADD CONSTRAINT harvest_start_claims_pkey PRIMARY KEY (workflow_name, idempotency_key);

ALTER TABLE ONLY public.harvest_workflow_events
    ADD CONSTRAINT harvest_workflow_events_execution_id_op_seq_key UNIQUE (execution_id, op_seq);

ALTER TABLE ONLY public.harvest_workflow_events
    ADD CONSTRAINT harvest_workflow_events_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.harvest_workflow_executions
    ADD CONSTRAINT harvest_workflow_executions_pkey PRIMARY KEY (id);

CREATE UNIQUE INDEX harvest_batch_items_key ON public.harvest_batch_items USING btree (workflow_name, workflow_id) WHERE (workflow_id IS NOT NULL);

CREATE INDEX harvest_batch_items_pending ON public.harvest_batch_items USING btree (workflow_name, id) WHERE (fired_execution IS NULL);

CREATE INDEX harvest_debounce_due ON public.harvest_debounce USING btree (fire_at) WHERE pending;

CREATE INDEX harvest_deferred_starts_order ON public.harvest_deferred_starts USING btree (workflow_name, id);

CREATE INDEX harvest_engine_dead_letters_open ON public.harvest_engine_dead_letters USING btree (failed_at) WHERE (replayed_at IS NULL);

CREATE INDEX harvest_executions_by_status ON public.harvest_workflow_executions USING btree (status, created_at, id) WHERE (status <> 'completed'::text);

CREATE INDEX harvest_executions_created ON public.harvest_workflow_executions USING btree (created_at, id);

CREATE UNIQUE INDEX harvest_executions_current ON public.harvest_workflow_executions USING btree (workflow_name, workflow_id) WHERE ((NOT superseded) AND (workflow_id IS NOT NULL));

CREATE UNIQUE INDEX harvest_executions_key ON public.harvest_workflow_executions USING btree (workflow_name, idempotency_key) WHERE (idempotency_key IS NOT NULL);

CREATE INDEX harvest_executions_runnable ON public.harvest_workflow_executions USING btree (run_after) WHERE (status = ANY (ARRAY['pending'::text, 'waiting'::text]));

CREATE UNIQUE INDEX harvest_executions_runs ON public.harvest_workflow_executions USING btree (workflow_name, workflow_id, run_no) WHERE (workflow_id IS NOT NULL);

CREATE INDEX harvest_executions_source_ref ON public.harvest_workflow_executions USING btree (start_source_ref) WHERE (start_source_ref IS NOT NULL);

CREATE INDEX harvest_executions_terminal ON public.harvest_workflow_executions USING btree (completed_at) WHERE (status = ANY (ARRAY['completed'::text, 'failed'::text, 'cancelled'::text, 'terminated'::text]));

CREATE INDEX harvest_mutex_queue_order ON public.harvest_mutex_queue USING btree (name, seq);

CREATE INDEX harvest_mutex_queue_run ON public.harvest_mutex_queue USING btree (execution_id);

CREATE INDEX harvest_run_leases_expiry ON public.harvest_run_leases USING btree (lease_expires_at);

CREATE INDEX harvest_run_leases_keyed ON public.harvest_run_leases USING btree (workflow_name, concurrency_key) WHERE (concurrency_key IS NOT NULL);

CREATE UNIQUE INDEX harvest_run_leases_owner ON public.harvest_run_leases USING btree (lease_owner);

CREATE INDEX harvest_signals_execution ON public.harvest_signals USING btree (execution_id, name, id);

CREATE INDEX harvest_start_claims_expiry ON public.harvest_start_claims USING btree (expires_at);

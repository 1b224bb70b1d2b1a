-- Sweeps, trials (the durable queue), their metrics, and workers.
-- Times are timestamptz; the scheduler passes its own clock's "now".

CREATE TABLE sweeps (
  id                    bigserial PRIMARY KEY,
  request_id            text UNIQUE,               -- client idempotency key (NULL: none)
  name                  text NOT NULL,
  spec                  jsonb NOT NULL,            -- normsweep.v1.SweepSpec as protobuf JSON
  state                 text NOT NULL CHECK (state IN ('RUNNING', 'COMPLETED', 'CANCELLED')),
  priority              integer NOT NULL DEFAULT 0,
  max_attempts          integer NOT NULL CHECK (max_attempts > 0),
  max_concurrent_trials integer NOT NULL DEFAULT 0 CHECK (max_concurrent_trials >= 0),
  trial_count           integer NOT NULL,
  created_at            timestamptz NOT NULL,
  finished_at           timestamptz
);
CREATE INDEX sweeps_state ON sweeps (state, id);

CREATE TABLE workers (
  id                bigserial PRIMARY KEY,
  name              text NOT NULL,
  hostname          text NOT NULL DEFAULT '',
  devices           text[] NOT NULL DEFAULT '{}',
  registered_at     timestamptz NOT NULL,
  last_heartbeat_at timestamptz NOT NULL
);

-- Bumped on every change of a trial row; WatchSweep reads changes after a number.
CREATE SEQUENCE trial_update_seq;

CREATE TABLE trials (
  id                 bigserial PRIMARY KEY,
  sweep_id           bigint NOT NULL REFERENCES sweeps (id) ON DELETE CASCADE,
  trial_index        integer NOT NULL,
  placement          text NOT NULL,
  warmup_steps       integer NOT NULL,
  peak_lr            double precision NOT NULL,
  seed               integer NOT NULL,
  variant            text NOT NULL DEFAULT '',   -- extra-axis values, e.g. 'layers=12'
  config             jsonb NOT NULL,             -- normsweep.v1.TrainConfig (resolved)
  priority           integer NOT NULL,           -- the sweep's, copied for the queue index
  state              text NOT NULL CHECK (state IN ('PENDING', 'RUNNING', 'SUCCEEDED', 'DIVERGED', 'FAILED', 'CANCELLED')),
  attempts           integer NOT NULL DEFAULT 0,
  worker_id          bigint REFERENCES workers (id),
  lease_expires_at   timestamptz,
  last_step          integer NOT NULL DEFAULT 0,
  last_train_loss    double precision,
  last_val_loss      double precision,
  final_val_loss     double precision,
  best_val_loss      double precision,
  final_train_loss   double precision,
  final_val_accuracy double precision,
  diverged_step      integer,
  tokens_per_s       double precision,
  error              text NOT NULL DEFAULT '',
  created_at         timestamptz NOT NULL,
  started_at         timestamptz,
  finished_at        timestamptz,
  update_seq         bigint NOT NULL DEFAULT nextval('trial_update_seq'),
  UNIQUE (sweep_id, trial_index)
);
-- The queue: leasing takes the first unlocked row of this index.
CREATE INDEX trials_queue ON trials (priority DESC, id) WHERE state = 'PENDING';
CREATE INDEX trials_leases ON trials (lease_expires_at) WHERE state = 'RUNNING';
CREATE INDEX trials_sweep_state ON trials (sweep_id, state);
CREATE INDEX trials_sweep_seq ON trials (sweep_id, update_seq);

-- One row per (trial, step); a re-sent batch changes nothing.
CREATE TABLE trial_metrics (
  trial_id     bigint NOT NULL REFERENCES trials (id) ON DELETE CASCADE,
  step         integer NOT NULL,
  lr           double precision,
  train_loss   double precision,
  val_loss     double precision,
  val_accuracy double precision,
  grad_norm    double precision,
  tokens_per_s double precision,
  PRIMARY KEY (trial_id, step)
);

-- Frobenius norms of the FFN weight gradients per layer (Xiong et al. 2020, Fig. 3).
CREATE TABLE layer_grad_norms (
  trial_id bigint NOT NULL REFERENCES trials (id) ON DELETE CASCADE,
  step     integer NOT NULL,
  layer    integer NOT NULL,
  matrix   text NOT NULL,
  norm     double precision NOT NULL,
  PRIMARY KEY (trial_id, step, layer, matrix)
);

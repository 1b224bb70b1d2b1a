#include "db/postgres_store.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "common/wait_for.h"
#include "db/migrations.h"
#include "google/protobuf/util/time_util.h"
#include "proto/schema/json.h"
#include "proto/schema/train_config.h"

namespace normsweep::db {
namespace {

using google::protobuf::util::TimeUtil;

// timestamptz <-> epoch microseconds, exactly (no float rounding).
#define NS_TS(n) "('epoch'::timestamptz + $" #n "::bigint * interval '1 microsecond')"
#define NS_MICROS(col) "(extract(epoch FROM " col ") * 1000000)::bigint"

constexpr char kTrialColumns[] =
    "t.id, t.sweep_id, t.trial_index, COALESCE(E'\\\\x' || encode(t.config_pb, 'hex'), t.config::text),"
    " t.variant, t.state, t.attempts, COALESCE(t.worker_id, 0), " NS_MICROS("t.lease_expires_at") ", t.last_step,"
    " t.last_train_loss, t.last_val_loss, t.final_val_loss, t.best_val_loss,"
    " t.final_train_loss, t.final_val_accuracy, t.diverged_step, t.tokens_per_s, t.error, "
    NS_MICROS("t.created_at") ", " NS_MICROS("t.started_at") ", " NS_MICROS("t.finished_at")
    ", t.update_seq";
constexpr int kTrialColumnCount = 23;

constexpr char kSweepColumns[] =
    "s.id, s.request_id, s.name, s.spec::text, s.state, s.trial_count, " NS_MICROS("s.created_at")
    ", " NS_MICROS("s.finished_at");

// The CTE that takes trials just made final off their sweeps' open_trials and
// completes a RUNNING sweep that reaches 0 (db/migrations/0006_open_trials.sql).
// It reads a CTE d(sweep_id, n, finished_at): per sweep, how many trials
// became final, and the sweep's finished_at should it complete.
constexpr char kCloseOpenTrials[] =
    " s AS (UPDATE sweeps s SET open_trials = s.open_trials - d.n,"
    " state = CASE WHEN s.open_trials = d.n AND s.state = 'RUNNING' THEN 'COMPLETED' ELSE s.state END,"
    " finished_at = CASE WHEN s.open_trials = d.n AND s.state = 'RUNNING' THEN d.finished_at ELSE s.finished_at END"
    " FROM d WHERE s.id = d.sweep_id)";

// A sweep at least this large is followed by ANALYZE trials (see CreateSweep).
constexpr size_t kAnalyzeAfterTrials = 500;

// Lease locks for sweeps with max_concurrent_trials: pg_advisory_xact_lock(class, sweep).
constexpr int32_t kSweepLockClass = 0x4e53;  // "NS"

// A retried trial starts its metric history afresh. Run after its lease is
// taken and before the worker hears of it: nothing of the new attempt can
// be written yet, and the old attempt's writes fail the attempt check.
absl::Status ClearHistory(PgConnection& conn, const std::string& trial_ids) {
  return conn.ExecPrepared("ns_clear_history",
                           "WITH b AS (DELETE FROM trial_metric_batches WHERE trial_id = ANY($1::bigint[])),"
                           " l AS (DELETE FROM trial_metric_late WHERE trial_id = ANY($1::bigint[]))"
                           " DELETE FROM layer_grad_norms WHERE trial_id = ANY($1::bigint[])",
                           PgParams().Add(trial_ids))
      .status();
}

absl::Status NoSweep(int64_t id) { return absl::NotFoundError(absl::StrCat("sweep_id ", id, ": no such sweep")); }
absl::Status NoTrial(int64_t id) { return absl::NotFoundError(absl::StrCat("trial_id ", id, ": no such trial")); }
absl::Status NoWorker(int64_t id) {
  return absl::NotFoundError(absl::StrCat("worker_id ", id, ": no such worker (register first)"));
}

// Sets the field only for a non-NULL value (mutable_x() would mark it present).
#define NS_SET_TIME(result, row, col, msg, field)                                        \
  if (auto v = (result).GetOptionalMicros(row, col)) {                                     \
    *(msg).mutable_##field() = TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(*v)); \
  }

// A trial's stored config as kTrialColumns reads it: config_pb in hex after
// "\x" (encoded in SQL, whatever the server's bytea_output), or, for trials
// stored before migration 0007, the config as JSON.
absl::Status ParseStoredConfig(absl::string_view stored, v1::TrainConfig& config) {
  if (!absl::ConsumePrefix(&stored, "\\x")) {
    ASSIGN_OR_RETURN(config, schema::TrainConfigFromJson(std::string(stored)));
    return absl::OkStatus();
  }
  if (stored.size() % 2 != 0 || !std::all_of(stored.begin(), stored.end(), absl::ascii_isxdigit) ||
      !config.ParseFromString(absl::HexStringToBytes(stored))) {
    return absl::InvalidArgumentError("config_pb is not a TrainConfig");
  }
  return absl::OkStatus();
}

// The trial columns (kTrialColumns) start at column c0 of the result.
absl::StatusOr<v1::Trial> ParseTrial(const PgResult& r, int row, int c0 = 0) {
  v1::Trial t;
  t.set_id(r.GetInt64(row, c0 + 0));
  t.set_sweep_id(r.GetInt64(row, c0 + 1));
  t.set_index(static_cast<int32_t>(r.GetInt64(row, c0 + 2)));
  if (absl::Status st = ParseStoredConfig(r.GetString(row, c0 + 3), *t.mutable_config()); !st.ok()) {
    return absl::DataLossError(absl::StrCat("trial ", t.id(), ": stored config: ", st.message()));
  }
  t.set_variant(r.GetString(row, c0 + 4));
  t.set_state(TrialStateFromName(r.GetString(row, c0 + 5)));
  t.set_attempts(static_cast<int32_t>(r.GetInt64(row, c0 + 6)));
  t.set_worker_id(r.GetInt64(row, c0 + 7));
  NS_SET_TIME(r, row, c0 + 8, t, lease_expires_at);
  t.set_last_step(static_cast<int32_t>(r.GetInt64(row, c0 + 9)));
  if (auto v = r.GetOptionalDouble(row, c0 + 10)) t.set_last_train_loss(*v);
  if (auto v = r.GetOptionalDouble(row, c0 + 11)) t.set_last_val_loss(*v);
  v1::TrialResult* res = t.mutable_result();
  if (auto v = r.GetOptionalDouble(row, c0 + 12)) res->set_final_val_loss(*v);
  if (auto v = r.GetOptionalDouble(row, c0 + 13)) res->set_best_val_loss(*v);
  if (auto v = r.GetOptionalDouble(row, c0 + 14)) res->set_final_train_loss(*v);
  if (auto v = r.GetOptionalDouble(row, c0 + 15)) res->set_final_val_accuracy(*v);
  if (!r.IsNull(row, c0 + 16)) res->set_diverged_step(static_cast<int32_t>(r.GetInt64(row, c0 + 16)));
  if (auto v = r.GetOptionalDouble(row, c0 + 17)) res->set_tokens_per_s(*v);
  res->set_error(r.GetString(row, c0 + 18));
  NS_SET_TIME(r, row, c0 + 19, t, created_at);
  NS_SET_TIME(r, row, c0 + 20, t, started_at);
  NS_SET_TIME(r, row, c0 + 21, t, finished_at);
  return t;
}

absl::StatusOr<std::vector<v1::Trial>> ParseTrials(const PgResult& r) {
  std::vector<v1::Trial> out;
  out.reserve(r.rows());
  for (int i = 0; i < r.rows(); ++i) {
    ASSIGN_OR_RETURN(v1::Trial t, ParseTrial(r, i));
    out.push_back(std::move(t));
  }
  return out;
}

absl::StatusOr<std::vector<v1::Sweep>> ParseSweeps(const PgResult& r) {
  std::vector<v1::Sweep> out;
  for (int i = 0; i < r.rows(); ++i) {
    v1::Sweep s;
    s.set_id(r.GetInt64(i, 0));
    s.set_request_id(r.GetString(i, 1));
    s.set_name(r.GetString(i, 2));
    // A spec stored by a newer version may have more fields.
    absl::Status st = schema::FromJson(r.GetString(i, 3), schema::UnknownFields::kIgnore, s.mutable_spec());
    if (!st.ok()) return absl::DataLossError(absl::StrCat("sweep ", s.id(), ": stored spec: ", st.message()));
    s.set_state(SweepStateFromName(r.GetString(i, 4)));
    s.set_trial_count(static_cast<int32_t>(r.GetInt64(i, 5)));
    NS_SET_TIME(r, i, 6, s, created_at);
    NS_SET_TIME(r, i, 7, s, finished_at);
    out.push_back(std::move(s));
  }
  return out;
}

// Fills counts for the given sweeps (one query).
absl::Status FillCounts(PgConnection& conn, std::vector<v1::Sweep>& sweeps) {
  if (sweeps.empty()) return absl::OkStatus();
  PgArray ids;
  std::map<int64_t, v1::Sweep*> by_id;
  for (v1::Sweep& s : sweeps) {
    ids.Add(s.id());
    by_id[s.id()] = &s;
    s.mutable_counts()->Clear();
  }
  ASSIGN_OR_RETURN(PgResult r, conn.Exec("SELECT sweep_id, state, count(*) FROM trials"
                                         " WHERE sweep_id = ANY($1::bigint[]) GROUP BY 1, 2",
                                         PgParams().Add(ids.Finish())));
  for (int i = 0; i < r.rows(); ++i) {
    v1::Sweep* s = by_id[r.GetInt64(i, 0)];
    AddToCounts(TrialStateFromName(r.GetString(i, 1)), s->mutable_counts(), r.GetInt64(i, 2));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Sweep> LoadSweep(PgConnection& conn, int64_t sweep_id) {
  ASSIGN_OR_RETURN(PgResult r, conn.Exec(absl::StrCat("SELECT ", kSweepColumns, " FROM sweeps s WHERE s.id = $1"),
                                         PgParams().Add(sweep_id)));
  ASSIGN_OR_RETURN(std::vector<v1::Sweep> sweeps, ParseSweeps(r));
  if (sweeps.empty()) return NoSweep(sweep_id);
  RETURN_IF_ERROR(FillCounts(conn, sweeps));
  return sweeps[0];
}

absl::StatusOr<v1::Trial> LoadTrial(PgConnection& conn, int64_t trial_id) {
  ASSIGN_OR_RETURN(PgResult r, conn.Exec(absl::StrCat("SELECT ", kTrialColumns, " FROM trials t WHERE t.id = $1"),
                                         PgParams().Add(trial_id)));
  if (r.rows() == 0) return NoTrial(trial_id);
  return ParseTrial(r, 0);
}

absl::Status CheckSweepExists(PgConnection& conn, int64_t sweep_id) {
  ASSIGN_OR_RETURN(PgResult r, conn.Exec("SELECT 1 FROM sweeps WHERE id = $1", PgParams().Add(sweep_id)));
  return r.rows() == 0 ? NoSweep(sweep_id) : absl::OkStatus();
}

absl::Status LeaseNotHeld(const v1::Trial& t) {
  return absl::FailedPreconditionError(absl::StrCat("trial_id ", t.id(), ": lease not held (state ",
                                                    TrialStateName(t.state()), ", attempt ",
                                                    t.attempts(), ")"));
}

// Marks sweeps COMPLETED whose trials are all final (sweep_ids empty: all):
// a sweep created without trials, and the periodic backstop for sweeps.open_trials.
absl::Status CompleteSweeps(PgConnection& conn, const std::vector<int64_t>& sweep_ids, absl::Time now) {
  PgArray ids;
  for (int64_t id : sweep_ids) ids.Add(id);
  return conn
      .ExecPrepared("ns_complete_sweeps",
                    "UPDATE sweeps s SET state = 'COMPLETED', open_trials = 0, finished_at = " NS_TS(2)
            " WHERE (cardinality($1::bigint[]) = 0 OR s.id = ANY($1::bigint[])) AND s.state = 'RUNNING'"
            " AND NOT EXISTS (SELECT 1 FROM trials t WHERE t.sweep_id = s.id AND t.state IN ('PENDING', 'RUNNING'))",
            PgParams().Add(sweep_ids.empty() ? std::string("{}") : ids.Finish()).AddMicros(now))
      .status();
}

// Runs fn on a pooled connection; retries once on a fresh connection when a
// stale pooled one turns out broken.
template <typename T, typename Fn>
absl::StatusOr<T> WithConnection(PgPool& pool, Fn&& fn) {
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<PgPool::Lease> conn = pool.Acquire();
    if (!conn.ok()) return conn.status();
    absl::StatusOr<T> result = fn(**conn);
    if (!result.ok() && (*conn)->broken() && attempt == 0) continue;
    return result;
  }
}

// Merges points of the same step (first non-empty value wins), as the
// memory store and the ON CONFLICT clause do across batches.
std::vector<v1::MetricPoint> MergeByStep(const v1::ReportProgressRequest& req) {
  std::map<int32_t, v1::MetricPoint> merged;
  for (const v1::MetricPoint& p : req.points()) {
    auto [it, inserted] = merged.try_emplace(p.step(), p);
    if (inserted) continue;
    v1::MetricPoint& s = it->second;
    if (!s.has_lr() && p.has_lr()) s.set_lr(p.lr());
    if (!s.has_train_loss() && p.has_train_loss()) s.set_train_loss(p.train_loss());
    if (!s.has_val_loss() && p.has_val_loss()) s.set_val_loss(p.val_loss());
    if (!s.has_val_accuracy() && p.has_val_accuracy()) s.set_val_accuracy(p.val_accuracy());
    if (!s.has_grad_norm() && p.has_grad_norm()) s.set_grad_norm(p.grad_norm());
    if (!s.has_tokens_per_s() && p.has_tokens_per_s()) s.set_tokens_per_s(p.tokens_per_s());
  }
  std::vector<v1::MetricPoint> out;  // in step order, as a stored batch's arrays are
  out.reserve(merged.size());
  for (auto& [step, p] : merged) out.push_back(std::move(p));
  return out;
}

// The lease statement (LeaseGroup).
const std::string& LeaseGroupSql() {
  static const std::string sql = absl::StrCat(
      "WITH wk AS (SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) WITH ORDINALITY"
      "  AS wk(worker_id, now_us, expires_us, pos)),"
      " w AS (SELECT wk.* FROM wk WHERE EXISTS (SELECT 1 FROM workers WHERE workers.id = wk.worker_id)),"
      " wn AS (SELECT w.*, row_number() OVER (ORDER BY w.pos) AS k FROM w),"
      // The queue's head, read in order from the trials_queue index: the
      // sweep's state is a per-row filter and its limit is joined after the
      // LIMIT, so the planner has no join that it could hash over every
      // PENDING trial (it did, O(queue) per lease, on a table without
      // statistics).
      " c AS (SELECT t.id, t.priority, t.sweep_id FROM trials t"
      "  WHERE t.state = 'PENDING' AND (SELECT s.state FROM sweeps s WHERE s.id = t.sweep_id) = 'RUNNING'"
      "  ORDER BY t.priority DESC, t.id LIMIT (SELECT count(*) FROM w) FOR UPDATE OF t SKIP LOCKED),"
      // The sweep's limit by its primary key: as a join, the generic plan
      // hashes a sequential scan of sweeps, whose rows FinishTrial updates
      // all the time (0.3 ms of dead versions per lease group under load).
      " cn AS (SELECT c.id, (SELECT s.max_concurrent_trials FROM sweeps s WHERE s.id = c.sweep_id) AS lim,"
      "  row_number() OVER (ORDER BY c.priority DESC, c.id) AS k FROM c),"
      " pick AS (SELECT cn.id, cn.lim, wn.worker_id, wn.now_us, wn.expires_us, wn.pos FROM cn JOIN wn ON wn.k = cn.k),"
      " u AS (UPDATE trials t SET state = 'RUNNING', attempts = t.attempts + 1, worker_id = pick.worker_id,"
      "  lease_expires_at = 'epoch'::timestamptz + pick.expires_us * interval '1 microsecond',"
      "  started_at = COALESCE(t.started_at, 'epoch'::timestamptz + pick.now_us * interval '1 microsecond'),"
      "  last_step = 0, last_train_loss = NULL, last_val_loss = NULL, update_seq = nextval('trial_update_seq')"
      "  FROM pick WHERE t.id = pick.id AND pick.lim = 0 AND t.state = 'PENDING'"
      "  RETURNING pick.pos AS leased_pos, ", kTrialColumns, ")"
      " SELECT wk.pos, w.worker_id IS NOT NULL, pick.lim, u.* FROM wk"
      " LEFT JOIN w ON w.pos = wk.pos LEFT JOIN pick ON pick.pos = wk.pos LEFT JOIN u ON u.leased_pos = wk.pos"
      " ORDER BY wk.pos");
  return sql;
}

// The progress statement (RunProgressStatement).
const std::string& ProgressSql() {
  static const std::string sql = absl::StrCat(
      "WITH r AS (SELECT * FROM unnest($1::int[], $2::bigint[], $3::bigint[], $4::int[], $5::int[], $6::int[],"
      " $7::float8[], $8::int[], $9::float8[], $10::int[], $11::int[])"
      " AS r(i, trial_id, worker_id, attempt, max_step, train_step, train_loss, val_step, val_loss, lo, hi)),"
      " m AS (SELECT $12::int[] AS step, $13::float8[] AS lr, $14::float8[] AS train_loss, $15::float8[] AS val_loss,"
      " $16::float8[] AS val_accuracy, $17::float8[] AS grad_norm, $18::float8[] AS tokens_per_s),"
      " t AS (UPDATE trials tr SET last_step = GREATEST(tr.last_step, r.max_step),"
      " last_train_loss = CASE WHEN r.train_step >= tr.last_step THEN r.train_loss ELSE tr.last_train_loss END,"
      " last_val_loss = CASE WHEN r.val_step >= tr.last_step THEN r.val_loss ELSE tr.last_val_loss END,"
      " update_seq = nextval('trial_update_seq')"
      // old is the trial's row as this statement's snapshot saw it; tr is
      // re-read if a concurrent statement updated it meanwhile. Their
      // last_step differ when another statement stored progress since the
      // snapshot: what is new was decided on stale data, so the trial is
      // left out here and the caller runs it again.
      // The state test is written so that the planner cannot match it to the
      // partial index trials_leases (WHERE state = 'RUNNING'): statistics
      // from when the sweep was all PENDING made it loop over that whole
      // index, dead entries included, once per trial (2-3x the cost of this
      // statement) instead of looking each trial up by id.
      " FROM r JOIN trials old ON old.id = r.trial_id"
      " WHERE tr.id = r.trial_id AND tr.worker_id = r.worker_id AND tr.attempts = r.attempt"
      " AND COALESCE(tr.state, '') = 'RUNNING' AND tr.last_step = old.last_step"
      " RETURNING r.i, r.lo, r.hi, tr.id, tr.sweep_id, old.last_step AS old_last),"
      // f: where the batch's new steps begin (its steps are in order); only a
      // batch that starts at or below last_step needs them counted.
      " tf AS (SELECT t.*, CASE WHEN t.lo > t.hi OR m.step[t.lo] > t.old_last THEN t.lo"
      "  ELSE t.lo + (SELECT count(*)::int FROM unnest(m.step[t.lo:t.hi]) AS x(s) WHERE x.s <= t.old_last) END AS f"
      "  FROM t, m),"
      " b AS (INSERT INTO trial_metric_batches (trial_id, first_step, last_step, steps, lr, train_loss, val_loss,"
      " val_accuracy, grad_norm, tokens_per_s)"
      " SELECT t.id, m.step[t.f], m.step[t.hi], m.step[t.f:t.hi], m.lr[t.f:t.hi], m.train_loss[t.f:t.hi],"
      " m.val_loss[t.f:t.hi], m.val_accuracy[t.f:t.hi], m.grad_norm[t.f:t.hi], m.tokens_per_s[t.f:t.hi]"
      " FROM tf t, m WHERE t.f <= t.hi),"
      " u AS (SELECT t.id AS trial_id, m.step[k] AS step, m.lr[k] AS lr, m.train_loss[k] AS train_loss,"
      " m.val_loss[k] AS val_loss, m.val_accuracy[k] AS val_accuracy, m.grad_norm[k] AS grad_norm,"
      " m.tokens_per_s[k] AS tokens_per_s, s.*"
      " FROM tf t CROSS JOIN m CROSS JOIN LATERAL generate_series(t.lo, t.f - 1) AS k"
      " LEFT JOIN LATERAL (SELECT true AS s_in, mb.lr[j] AS s_lr, mb.train_loss[j] AS s_train_loss,"
      "  mb.val_loss[j] AS s_val_loss, mb.val_accuracy[j] AS s_val_accuracy, mb.grad_norm[j] AS s_grad_norm,"
      "  mb.tokens_per_s[j] AS s_tokens_per_s"
      "  FROM trial_metric_batches mb CROSS JOIN LATERAL array_position(mb.steps, m.step[k]) AS j"
      "  WHERE mb.trial_id = t.id AND mb.first_step <= m.step[k] AND mb.last_step >= m.step[k]"
      "  AND j IS NOT NULL) s ON true"
      " WHERE t.lo < t.f),"
      " l AS (INSERT INTO trial_metric_late AS tm (trial_id, step, lr, train_loss, val_loss, val_accuracy,"
      " grad_norm, tokens_per_s)"
      " SELECT u.trial_id, u.step, CASE WHEN u.s_lr IS NULL THEN u.lr END,"
      " CASE WHEN u.s_train_loss IS NULL THEN u.train_loss END, CASE WHEN u.s_val_loss IS NULL THEN u.val_loss END,"
      " CASE WHEN u.s_val_accuracy IS NULL THEN u.val_accuracy END,"
      " CASE WHEN u.s_grad_norm IS NULL THEN u.grad_norm END,"
      " CASE WHEN u.s_tokens_per_s IS NULL THEN u.tokens_per_s END FROM u"
      " WHERE u.s_in IS NULL OR (u.s_lr IS NULL AND u.lr IS NOT NULL)"
      " OR (u.s_train_loss IS NULL AND u.train_loss IS NOT NULL) OR (u.s_val_loss IS NULL AND u.val_loss IS NOT NULL)"
      " OR (u.s_val_accuracy IS NULL AND u.val_accuracy IS NOT NULL)"
      " OR (u.s_grad_norm IS NULL AND u.grad_norm IS NOT NULL)"
      " OR (u.s_tokens_per_s IS NULL AND u.tokens_per_s IS NOT NULL)"
      " ON CONFLICT (trial_id, step) DO UPDATE SET"
      " lr = COALESCE(tm.lr, EXCLUDED.lr), train_loss = COALESCE(tm.train_loss, EXCLUDED.train_loss),"
      " val_loss = COALESCE(tm.val_loss, EXCLUDED.val_loss),"
      " val_accuracy = COALESCE(tm.val_accuracy, EXCLUDED.val_accuracy),"
      " grad_norm = COALESCE(tm.grad_norm, EXCLUDED.grad_norm),"
      " tokens_per_s = COALESCE(tm.tokens_per_s, EXCLUDED.tokens_per_s)"
      // A re-sent batch fills nothing, so it writes nothing.
      " WHERE (tm.lr IS NULL AND EXCLUDED.lr IS NOT NULL)"
      " OR (tm.train_loss IS NULL AND EXCLUDED.train_loss IS NOT NULL)"
      " OR (tm.val_loss IS NULL AND EXCLUDED.val_loss IS NOT NULL)"
      " OR (tm.val_accuracy IS NULL AND EXCLUDED.val_accuracy IS NOT NULL)"
      " OR (tm.grad_norm IS NULL AND EXCLUDED.grad_norm IS NOT NULL)"
      " OR (tm.tokens_per_s IS NULL AND EXCLUDED.tokens_per_s IS NOT NULL)),"
      " g AS (INSERT INTO layer_grad_norms (trial_id, step, layer, matrix, norm)"
      " SELECT t.id, g.step, g.layer, g.matrix, g.norm FROM unnest($19::int[], $20::int[], $21::int[],"
      " $22::text[], $23::float8[]) AS g(i, step, layer, matrix, norm) JOIN t ON t.i = g.i ON CONFLICT DO NOTHING)"
      " SELECT t.i, s.state = 'CANCELLED' FROM t JOIN sweeps s ON s.id = t.sweep_id");
  return sql;
}

// The finish statement (FinishStatement).
const std::string& FinishSql() {
  static const std::string sql = absl::StrCat(
      "WITH f AS (SELECT * FROM unnest($1::int[], $2::bigint[], $3::bigint[], $4::int[], $5::text[],"
      " $6::float8[], $7::float8[], $8::float8[], $9::float8[], $10::int[], $11::float8[], $12::text[], $13::bigint[])"
      " AS f(i, trial_id, worker_id, attempt, outcome, fvl, bvl, ftl, fva, ds, tps, err, now_us)),"
      " u AS (UPDATE trials t SET state = f.outcome, final_val_loss = f.fvl, best_val_loss = f.bvl,"
      " final_train_loss = f.ftl, final_val_accuracy = f.fva, diverged_step = f.ds, tokens_per_s = f.tps,"
      " error = f.err, lease_expires_at = NULL,"
      " finished_at = 'epoch'::timestamptz + f.now_us * interval '1 microsecond',"
      " update_seq = nextval('trial_update_seq')"
      // Trials looked up by id (= ANY: a generic plan that does so, instead
      // of planning each call afresh), not through trials_leases (see
      // RunProgressStatement).
      " FROM f WHERE t.id = ANY($2::bigint[]) AND t.id = f.trial_id AND t.worker_id = f.worker_id"
      " AND t.attempts = f.attempt AND COALESCE(t.state, '') = 'RUNNING' RETURNING f.i, ", kTrialColumns,
      ", f.now_us AS ns_now_us, t.sweep_id AS ns_sweep_id),"
      // The sweeps' open trials go down by those just made final.
      " d AS (SELECT ns_sweep_id AS sweep_id, count(*) AS n,"
      " 'epoch'::timestamptz + max(ns_now_us) * interval '1 microsecond' AS finished_at"
      " FROM u GROUP BY ns_sweep_id),",
      kCloseOpenTrials, " SELECT * FROM u");
  return sql;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PostgresStore>> PostgresStore::Open(const PostgresStoreOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<PgConnection> conn, PgConnection::Connect(options.connect));
  ASSIGN_OR_RETURN(int applied, ApplyMigrations(*conn, EmbeddedMigrations()));
  (void)applied;
  std::unique_ptr<PostgresStore> store(new PostgresStore(options, conn->Describe()));
  store->WarmUp(store->hot_connections_);
  store->OpenPool(options.pool_size);
  return store;
}

namespace {

// Up to n of the pool's connections at once, so that each is a different
// one (opened if need be); fewer when the database cannot be reached.
std::vector<PgPool::Lease> AcquireAll(PgPool& pool, int n) {
  std::vector<PgPool::Lease> leases;
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<PgPool::Lease> lease = pool.Acquire();
    if (!lease.ok()) break;
    leases.push_back(*std::move(lease));
  }
  return leases;
}

}  // namespace

void PostgresStore::OpenPool(int connections) { (void)AcquireAll(pool_, connections); }

void PostgresStore::WarmUp(int connections) {
  std::vector<PgPool::Lease> leases = AcquireAll(hot_pool_, connections);
  // Every parameter is an array: "{}" (text) is an empty one of any type.
  auto empty = [](int n) {
    PgParams p;
    for (int i = 0; i < n; ++i) p.Add("{}");
    return p;
  };
  for (PgPool::Lease& conn : leases) {
    (void)conn->ExecPrepared("ns_lease_group", LeaseGroupSql(), empty(3));
    (void)conn->ExecPrepared("ns_report_progress", ProgressSql(), empty(23));
    (void)conn->ExecPrepared("ns_finish_trials", FinishSql(), empty(13));
  }
}

absl::StatusOr<CreateSweepResult> PostgresStore::CreateSweep(const std::string& request_id,
                                                             const v1::SweepSpec& spec,
                                                             const std::vector<NewTrial>& trials,
                                                             absl::Time now) {
  int64_t sweep_id = 0;
  bool created = false;
  absl::Status status = InTransaction(pool_, [&](PgConnection& conn) -> absl::Status {
    PgParams p;
    if (request_id.empty()) p.AddNull(); else p.Add(request_id);
    p.Add(spec.name()).Add(schema::ToJson(spec)).Add(static_cast<int64_t>(spec.priority()))
        .Add(static_cast<int64_t>(spec.max_attempts()))
        .Add(static_cast<int64_t>(spec.max_concurrent_trials()))
        .Add(static_cast<int64_t>(trials.size())).AddMicros(now);
    ASSIGN_OR_RETURN(PgResult ins, conn.Exec(
        "INSERT INTO sweeps (request_id, name, spec, state, priority, max_attempts,"
        " max_concurrent_trials, trial_count, open_trials, created_at)"
        " VALUES ($1, $2, $3::jsonb, 'RUNNING', $4, $5, $6, $7, $7, " NS_TS(8) ")"
        " ON CONFLICT (request_id) DO NOTHING RETURNING id", p));
    if (ins.rows() == 0) {  // request_id seen before
      ASSIGN_OR_RETURN(PgResult r, conn.Exec(absl::StrCat("SELECT ", kSweepColumns,
                                                          " FROM sweeps s WHERE s.request_id = $1"),
                                             PgParams().Add(request_id)));
      ASSIGN_OR_RETURN(std::vector<v1::Sweep> existing, ParseSweeps(r));
      if (existing.empty()) return absl::AbortedError("request_id: concurrent submission, retry");
      if (existing[0].spec().SerializeAsString() != spec.SerializeAsString()) {
        return absl::AlreadyExistsError(absl::StrCat("request_id '", request_id, "': already used for sweep ",
                                                     existing[0].id(), " with a different spec"));
      }
      sweep_id = existing[0].id();
      return absl::OkStatus();
    }
    sweep_id = ins.GetInt64(0, 0);
    created = true;
    PgArray idx, placement, warmup, lr, seed, variant, config, config_pb;
    for (const NewTrial& t : trials) {
      idx.Add(static_cast<int64_t>(t.index));
      placement.AddString(t.config.placement());
      warmup.Add(static_cast<int64_t>(t.config.warmup_steps()));
      lr.Add(t.config.lr());
      seed.Add(static_cast<int64_t>(t.config.seed()));
      variant.AddString(t.variant);
      config.AddString(schema::TrainConfigToJson(t.config));
      config_pb.AddString(absl::BytesToHexString(t.config.SerializeAsString()));
    }
    RETURN_IF_ERROR(conn.Exec(
        "INSERT INTO trials (sweep_id, trial_index, placement, warmup_steps, peak_lr, seed, variant,"
        " config, config_pb, priority, state, created_at)"
        " SELECT $1, u.i, u.p, u.w, u.lr, u.s, u.v, u.c::jsonb, decode(u.pb, 'hex'), $2, 'PENDING', " NS_TS(3)
        " FROM unnest($4::int[], $5::text[], $6::int[], $7::float8[], $8::int[], $9::text[], $10::text[],"
        " $11::text[]) AS u(i, p, w, lr, s, v, c, pb)",
        PgParams().Add(sweep_id).Add(static_cast<int64_t>(spec.priority())).AddMicros(now)
            .Add(idx.Finish()).Add(placement.Finish()).Add(warmup.Finish()).Add(lr.Finish())
            .Add(seed.Finish()).Add(variant.Finish()).Add(config.Finish()).Add(config_pb.Finish())).status());
    if (trials.empty()) RETURN_IF_ERROR(CompleteSweeps(conn, {sweep_id}, now));
    return absl::OkStatus();
  });
  RETURN_IF_ERROR(status);
  if (created && trials.size() >= kAnalyzeAfterTrials) {
    // Fresh statistics for the queue: without them (autovacuum gets there
    // within a minute or so) the planner guesses the PENDING trials at a few
    // hundred and may plan the lease statement's queue scan as "read all,
    // then sort" instead of walking trials_queue in order. Best effort.
    absl::Status analyzed = WithConnection<bool>(pool_, [](PgConnection& conn) -> absl::StatusOr<bool> {
      RETURN_IF_ERROR(conn.Exec("ANALYZE trials").status());
      return true;
    }).status();
    if (!analyzed.ok()) std::fprintf(stderr, "normsweep: ANALYZE trials failed: %s\n", analyzed.ToString().c_str());
    // The new statistics invalidate the hot statements' plans: plan them
    // again now, before the caller hands the trials out, rather than in the
    // first leases and progress reports (30-40 ms per statement and
    // connection).
    WarmUp(hot_connections_);
  }
  ASSIGN_OR_RETURN(v1::Sweep sweep, GetSweep(sweep_id));
  return CreateSweepResult{std::move(sweep), created};
}

absl::StatusOr<v1::Sweep> PostgresStore::GetSweep(int64_t sweep_id) {
  return WithConnection<v1::Sweep>(pool_, [&](PgConnection& conn) { return LoadSweep(conn, sweep_id); });
}

absl::StatusOr<std::vector<v1::Sweep>> PostgresStore::ListSweeps(v1::SweepState state,
                                                                 int64_t before_id, int limit) {
  return WithConnection<std::vector<v1::Sweep>>(pool_, [&](PgConnection& conn)
                                                           -> absl::StatusOr<std::vector<v1::Sweep>> {
    ASSIGN_OR_RETURN(PgResult r, conn.Exec(
        absl::StrCat("SELECT ", kSweepColumns, " FROM sweeps s WHERE ($1 = '' OR s.state = $1)"
                     " AND ($2::bigint = 0 OR s.id < $2) ORDER BY s.id DESC LIMIT $3"),
        PgParams().Add(state == v1::SWEEP_STATE_UNSPECIFIED ? std::string() : SweepStateName(state))
            .Add(before_id).Add(static_cast<int64_t>(limit))));
    ASSIGN_OR_RETURN(std::vector<v1::Sweep> sweeps, ParseSweeps(r));
    RETURN_IF_ERROR(FillCounts(conn, sweeps));
    return sweeps;
  });
}

absl::StatusOr<v1::Sweep> PostgresStore::CancelSweep(int64_t sweep_id, absl::Time now) {
  RETURN_IF_ERROR(InTransaction(pool_, [&](PgConnection& conn) -> absl::Status {
    ASSIGN_OR_RETURN(PgResult r, conn.Exec("UPDATE sweeps SET state = 'CANCELLED', finished_at = " NS_TS(2)
                                           " WHERE id = $1 AND state = 'RUNNING' RETURNING id",
                                           PgParams().Add(sweep_id).AddMicros(now)));
    if (r.rows() == 0) return CheckSweepExists(conn, sweep_id);  // finished already: unchanged
    return conn.Exec("WITH c AS (UPDATE trials SET state = 'CANCELLED', finished_at = " NS_TS(2) ","
                     " update_seq = nextval('trial_update_seq')"
                     " WHERE sweep_id = $1 AND state = 'PENDING' RETURNING 1)"
                     " UPDATE sweeps SET open_trials = open_trials - (SELECT count(*) FROM c) WHERE id = $1",
                     PgParams().Add(sweep_id).AddMicros(now))
        .status();
  }));
  return GetSweep(sweep_id);
}

absl::StatusOr<std::vector<v1::Trial>> PostgresStore::ListTrials(int64_t sweep_id,
                                                                 v1::TrialState state,
                                                                 int32_t after_index, int limit) {
  return WithConnection<std::vector<v1::Trial>>(pool_, [&](PgConnection& conn)
                                                           -> absl::StatusOr<std::vector<v1::Trial>> {
    RETURN_IF_ERROR(CheckSweepExists(conn, sweep_id));
    ASSIGN_OR_RETURN(PgResult r, conn.Exec(
        absl::StrCat("SELECT ", kTrialColumns, " FROM trials t WHERE t.sweep_id = $1"
                     " AND ($2 = '' OR t.state = $2) AND t.trial_index > $3"
                     " ORDER BY t.trial_index LIMIT $4"),
        PgParams().Add(sweep_id)
            .Add(state == v1::TRIAL_STATE_UNSPECIFIED ? std::string() : TrialStateName(state))
            .Add(static_cast<int64_t>(after_index)).Add(static_cast<int64_t>(limit))));
    return ParseTrials(r);
  });
}

absl::StatusOr<std::vector<std::pair<v1::Trial, int64_t>>> PostgresStore::TrialsChangedSince(
    int64_t sweep_id, int64_t after_seq) {
  using Out = std::vector<std::pair<v1::Trial, int64_t>>;
  return WithConnection<Out>(pool_, [&](PgConnection& conn) -> absl::StatusOr<Out> {
    RETURN_IF_ERROR(CheckSweepExists(conn, sweep_id));
    ASSIGN_OR_RETURN(PgResult r, conn.Exec(
        absl::StrCat("SELECT ", kTrialColumns, " FROM trials t WHERE t.sweep_id = $1"
                     " AND t.update_seq > $2 ORDER BY t.update_seq"),
        PgParams().Add(sweep_id).Add(after_seq)));
    Out out;
    for (int i = 0; i < r.rows(); ++i) {
      ASSIGN_OR_RETURN(v1::Trial t, ParseTrial(r, i));
      out.emplace_back(std::move(t), r.GetInt64(i, kTrialColumnCount - 1));
    }
    return out;
  });
}

absl::StatusOr<v1::Trial> PostgresStore::GetTrial(int64_t trial_id) {
  return WithConnection<v1::Trial>(pool_, [&](PgConnection& conn) { return LoadTrial(conn, trial_id); });
}

absl::StatusOr<TrialHistory> PostgresStore::GetTrialHistory(int64_t trial_id) {
  return WithConnection<TrialHistory>(pool_, [&](PgConnection& conn) -> absl::StatusOr<TrialHistory> {
    ASSIGN_OR_RETURN(PgResult exists, conn.Exec("SELECT 1 FROM trials WHERE id = $1", PgParams().Add(trial_id)));
    if (exists.rows() == 0) return NoTrial(trial_id);
    TrialHistory h;
    ASSIGN_OR_RETURN(PgResult m, conn.Exec(
        "SELECT step, lr, train_loss, val_loss, val_accuracy, grad_norm, tokens_per_s"
        " FROM trial_metrics WHERE trial_id = $1 ORDER BY step", PgParams().Add(trial_id)));
    for (int i = 0; i < m.rows(); ++i) {
      v1::MetricPoint& p = h.metrics.emplace_back();
      p.set_step(static_cast<int32_t>(m.GetInt64(i, 0)));
      if (auto v = m.GetOptionalDouble(i, 1)) p.set_lr(*v);
      if (auto v = m.GetOptionalDouble(i, 2)) p.set_train_loss(*v);
      if (auto v = m.GetOptionalDouble(i, 3)) p.set_val_loss(*v);
      if (auto v = m.GetOptionalDouble(i, 4)) p.set_val_accuracy(*v);
      if (auto v = m.GetOptionalDouble(i, 5)) p.set_grad_norm(*v);
      if (auto v = m.GetOptionalDouble(i, 6)) p.set_tokens_per_s(*v);
    }
    ASSIGN_OR_RETURN(PgResult g, conn.Exec(
        "SELECT step, layer, matrix, norm FROM layer_grad_norms WHERE trial_id = $1"
        " ORDER BY step, layer, matrix", PgParams().Add(trial_id)));
    for (int i = 0; i < g.rows(); ++i) {
      int32_t step = static_cast<int32_t>(g.GetInt64(i, 0));
      if (h.layer_grad_norms.empty() || h.layer_grad_norms.back().step() != step) {
        h.layer_grad_norms.emplace_back().set_step(step);
      }
      v1::LayerGradNorm* n = h.layer_grad_norms.back().add_norms();
      n->set_layer(static_cast<int32_t>(g.GetInt64(i, 1)));
      n->set_matrix(g.GetString(i, 2));
      n->set_norm(g.GetDouble(i, 3));
    }
    ASSIGN_OR_RETURN(PgResult a, conn.Exec(
        "SELECT attempt, COALESCE(worker_id, 0), " NS_MICROS("ended_at") ", outcome, reason"
        " FROM trial_attempts WHERE trial_id = $1 ORDER BY attempt", PgParams().Add(trial_id)));
    for (int i = 0; i < a.rows(); ++i) {
      v1::TrialAttempt& at = h.attempts.emplace_back();
      at.set_attempt(static_cast<int32_t>(a.GetInt64(i, 0)));
      at.set_worker_id(a.GetInt64(i, 1));
      NS_SET_TIME(a, i, 2, at, ended_at);
      at.set_outcome(TrialStateFromName(a.GetString(i, 3)));
      at.set_reason(a.GetString(i, 4));
    }
    return h;
  });
}

absl::StatusOr<int64_t> PostgresStore::RegisterWorker(const v1::RegisterWorkerRequest& request,
                                                      absl::Time now) {
  PgArray devices;
  for (const std::string& d : request.devices()) devices.AddString(d);
  return WithConnection<int64_t>(pool_, [&](PgConnection& conn) -> absl::StatusOr<int64_t> {
    // One statement: the new row, and the earlier registrations of the same
    // name and hostname marked superseded by it.
    ASSIGN_OR_RETURN(PgResult r, conn.Exec(
        "WITH w AS (INSERT INTO workers (name, hostname, devices, registered_at, last_heartbeat_at)"
        " VALUES ($1, $2, $3::text[], " NS_TS(4) ", " NS_TS(4) ") RETURNING id),"
        " old AS (UPDATE workers o SET superseded_by = w.id FROM w"
        " WHERE o.name = $1 AND o.hostname = $2 AND o.superseded_by IS NULL AND o.id <> w.id)"
        " SELECT id FROM w",
        PgParams().Add(request.name()).Add(request.hostname()).Add(devices.Finish()).AddMicros(now)));
    return r.GetInt64(0, 0);
  });
}

absl::StatusOr<std::optional<v1::Trial>> PostgresStore::LeaseTrial(int64_t worker_id,
                                                                   absl::Time now,
                                                                   absl::Duration lease) {
  return WaitFor<std::optional<v1::Trial>>(
      [&](LeaseDone done) { LeaseTrialAsync(worker_id, now, lease, std::move(done)); });
}

void PostgresStore::LeaseTrialAsync(int64_t worker_id, absl::Time now, absl::Duration lease, LeaseDone done) {
  auto item = std::make_unique<LeaseItem>();
  item->worker_id = worker_id;
  item->now = now;
  item->lease = lease;
  item->done = std::move(done);
  lease_runner_.Submit(std::move(item));
}

void PostgresStore::LeaseGroup(std::vector<LeaseItem*>& group) {
  LeaseGroupStatement(group);
  // Sweeps with max_concurrent_trials: one transaction per caller, here on
  // the runner's thread.
  for (LeaseItem* item : group) {
    if (item->slow_path) item->result = LeaseSlowPath(item->worker_id, item->now, item->lease);
  }
  for (LeaseItem* item : group) item->done(std::move(item->result));
}

void PostgresStore::LeaseGroupStatement(std::vector<LeaseItem*>& group) {
  // One statement (its own transaction): take the first unlocked PENDING
  // trials in queue order and lease the k-th to the k-th known worker (a
  // worker with several free slots may appear more than once), except
  // trials of sweeps with max_concurrent_trials, whose worker takes the slow
  // path. Worker rows are only read (0008_trials_worker_fk.sql).
  const std::string& kSql = LeaseGroupSql();
  PgArrayOf<int64_t> workers, nows, expires;
  for (const LeaseItem* item : group) {
    workers.Add(item->worker_id);
    nows.Add(absl::ToUnixMicros(item->now));
    expires.Add(absl::ToUnixMicros(item->now + item->lease));
  }
  PgParams p;
  p.Add(workers).Add(nows).Add(expires);
  absl::Status status;
  for (int attempt = 0; attempt < 3; ++attempt) {
    status = WithConnection<bool>(hot_pool_, [&](PgConnection& conn) -> absl::StatusOr<bool> {
      ASSIGN_OR_RETURN(PgResult r, conn.ExecPrepared("ns_lease_group", kSql, p));
      if (r.rows() != static_cast<int>(group.size())) return absl::InternalError("lease: unexpected row count");
      for (int i = 0; i < r.rows(); ++i) {
        LeaseItem* item = group[r.GetInt64(i, 0) - 1];
        if (!r.GetBool(i, 1)) {
          item->result = NoWorker(item->worker_id);
        } else if (!r.IsNull(i, 4)) {
          ASSIGN_OR_RETURN(v1::Trial t, ParseTrial(r, i, 4));
          item->result = std::optional<v1::Trial>(std::move(t));
        } else if (!r.IsNull(i, 2) && r.GetInt64(i, 2) > 0) {
          item->slow_path = true;
        } else {
          item->result = std::optional<v1::Trial>();  // nothing pending (or all locked by other leasers)
        }
      }
      return true;
    }).status();
    // A deadlock aborts the statement as a whole; it is safe to run again.
    if (status.code() != absl::StatusCode::kAborted) break;
  }
  if (!status.ok()) {
    for (LeaseItem* item : group) item->result = status;
    return;
  }
  PgArray retried;
  std::vector<LeaseItem*> retried_items;
  for (LeaseItem* item : group) {
    if (item->result.ok() && item->result->has_value() && (*item->result)->attempts() > 1) {
      retried.Add((*item->result)->id());
      retried_items.push_back(item);
    }
  }
  if (retried_items.empty()) return;
  const std::string ids = retried.Finish();
  absl::Status cleared = WithConnection<bool>(hot_pool_, [&](PgConnection& conn) -> absl::StatusOr<bool> {
    RETURN_IF_ERROR(ClearHistory(conn, ids));
    return true;
  }).status();
  if (!cleared.ok()) {
    // The lease stays unheard of and expires; the trial is retried then.
    for (LeaseItem* item : retried_items) {
      item->result = MarkDatabaseError(absl::Status(cleared.code(), absl::StrCat("trial_id ", (*item->result)->id(),
                                                                                 ": clearing the last attempt's metrics: ",
                                                                                 cleared.message())));
    }
  }
}

absl::StatusOr<std::optional<v1::Trial>> PostgresStore::LeaseSlowPath(int64_t worker_id, absl::Time now,
                                                                      absl::Duration lease) {
  std::optional<v1::Trial> leased;
  absl::Status status = InTransaction(pool_, [&](PgConnection& conn) -> absl::Status {
    leased.reset();
    ASSIGN_OR_RETURN(PgResult w, conn.Exec("SELECT 1 FROM workers WHERE id = $1", PgParams().Add(worker_id)));
    if (w.rows() == 0) return NoWorker(worker_id);
    PgArray full;  // sweeps found at max_concurrent_trials in this transaction
    std::string full_sweeps = full.Finish();
    for (int round = 0; round < 64; ++round) {
      ASSIGN_OR_RETURN(PgResult c, conn.Exec(
          "SELECT t.id, t.sweep_id, s.max_concurrent_trials FROM trials t JOIN sweeps s ON s.id = t.sweep_id"
          " WHERE t.state = 'PENDING' AND s.state = 'RUNNING' AND t.sweep_id <> ALL($1::bigint[])"
          " ORDER BY t.priority DESC, t.id LIMIT 1 FOR UPDATE OF t SKIP LOCKED",
          PgParams().Add(full_sweeps)));
      if (c.rows() == 0) return absl::OkStatus();
      const int64_t trial_id = c.GetInt64(0, 0), sweep_id = c.GetInt64(0, 1);
      const int64_t limit = c.GetInt64(0, 2);
      if (limit > 0) {
        // Serialise leases of this sweep so that the count below is exact.
        RETURN_IF_ERROR(conn.Exec("SELECT pg_advisory_xact_lock($1::int, $2::int)",
                                  PgParams().Add(static_cast<int64_t>(kSweepLockClass))
                                      .Add(static_cast<int64_t>(sweep_id & 0x7fffffff))).status());
        ASSIGN_OR_RETURN(PgResult n, conn.Exec(
            "SELECT count(*) FROM trials WHERE sweep_id = $1 AND state = 'RUNNING'", PgParams().Add(sweep_id)));
        if (n.GetInt64(0, 0) >= limit) {
          full.Add(sweep_id);
          full_sweeps = full.Finish();
          continue;
        }
      }
      ASSIGN_OR_RETURN(PgResult u, conn.Exec(
          absl::StrCat("UPDATE trials t SET state = 'RUNNING', attempts = attempts + 1, worker_id = $2,"
                       " lease_expires_at = ", NS_TS(3), ", started_at = COALESCE(started_at, ", NS_TS(4), "),"
                       " last_step = 0, last_train_loss = NULL, last_val_loss = NULL,"
                       " update_seq = nextval('trial_update_seq') WHERE t.id = $1 RETURNING ", kTrialColumns),
          PgParams().Add(trial_id).Add(worker_id).AddMicros(now + lease).AddMicros(now)));
      ASSIGN_OR_RETURN(v1::Trial t, ParseTrial(u, 0));
      if (t.attempts() > 1) {
        PgArray id;
        id.Add(trial_id);
        RETURN_IF_ERROR(ClearHistory(conn, id.Finish()));
      }
      leased = std::move(t);
      return absl::OkStatus();
    }
    return absl::OkStatus();
  });
  RETURN_IF_ERROR(status);
  return leased;
}

absl::StatusOr<HeartbeatResult> PostgresStore::Heartbeat(int64_t worker_id,
                                                         const std::vector<v1::TrialLease>& leases,
                                                         absl::Time now, absl::Duration lease) {
  // Trial id order, as progress groups lock rows (fewer lock-order deadlocks).
  std::vector<v1::TrialLease> sorted = leases;
  std::sort(sorted.begin(), sorted.end(),
            [](const v1::TrialLease& a, const v1::TrialLease& b) { return a.trial_id() < b.trial_id(); });
  PgArray ids, attempts;
  for (const v1::TrialLease& l : sorted) {
    ids.Add(l.trial_id());
    attempts.Add(static_cast<int64_t>(l.attempt()));
  }
  return WithConnection<HeartbeatResult>(pool_, [&](PgConnection& conn) -> absl::StatusOr<HeartbeatResult> {
    ASSIGN_OR_RETURN(PgResult w, conn.ExecPrepared("ns_touch_worker",
                                                   "UPDATE workers SET last_heartbeat_at = " NS_TS(2) " WHERE id = $1",
                                                   PgParams().Add(worker_id).AddMicros(now)));
    if (w.affected() == 0) return NoWorker(worker_id);
    HeartbeatResult result;
    if (leases.empty()) return result;
    ASSIGN_OR_RETURN(PgResult r, conn.ExecPrepared("ns_renew_leases",
        "UPDATE trials t SET lease_expires_at = " NS_TS(2)
        " FROM unnest($3::bigint[], $4::int[]) AS l(id, attempt), sweeps s"
        // COALESCE: by id, not through trials_leases (see RunProgressStatement).
        " WHERE t.id = l.id AND t.attempts = l.attempt AND t.worker_id = $1 AND COALESCE(t.state, '') = 'RUNNING'"
        " AND s.id = t.sweep_id RETURNING t.id, s.state = 'CANCELLED'",
        PgParams().Add(worker_id).AddMicros(now + lease).Add(ids.Finish()).Add(attempts.Finish())));
    std::map<int64_t, bool> renewed;
    for (int i = 0; i < r.rows(); ++i) renewed[r.GetInt64(i, 0)] = r.GetBool(i, 1);
    for (const v1::TrialLease& l : leases) {
      auto it = renewed.find(l.trial_id());
      if (it == renewed.end()) {
        result.lost_trial_ids.push_back(l.trial_id());
      } else if (it->second) {
        result.cancelled_trial_ids.push_back(l.trial_id());
      }
    }
    return result;
  });
}

namespace {

PgConnectOptions HotConnectOptions(PgConnectOptions options) {
  options.generic_plans = true;
  return options;
}

}  // namespace

PostgresStore::PostgresStore(const PostgresStoreOptions& options, std::string description)
    : pool_(options.connect, options.pool_size),
      hot_connections_(options.progress_writers + options.lease_takers + options.finish_writers),
      hot_pool_(HotConnectOptions(options.connect), hot_connections_),
      description_(std::move(description)),
      progress_runner_(
          options.progress_writers, options.progress_group_size,
          [this](std::vector<ProgressItem*>& group) { WriteProgressGroup(group); },
          [](const ProgressItem& item) { return item.request->trial_id(); }),
      lease_runner_(
          options.lease_takers, options.lease_group_size,
          [this](std::vector<LeaseItem*>& group) { LeaseGroup(group); },
          [](const LeaseItem&) { return int64_t{0}; }),
      finish_runner_(
          options.finish_writers, options.finish_group_size,
          [this](std::vector<FinishItem*>& group) { FinishGroup(group); },
          [](const FinishItem& item) { return item.request->trial_id(); }) {}

absl::StatusOr<ProgressResult> PostgresStore::ReportProgress(const v1::ReportProgressRequest& req,
                                                             absl::Time now) {
  return WaitFor<ProgressResult>([&](ProgressDone done) { ReportProgressAsync(req, now, std::move(done)); });
}

void PostgresStore::ReportProgressAsync(const v1::ReportProgressRequest& req, absl::Time, ProgressDone done) {
  auto item = std::make_unique<ProgressItem>();
  item->request = &req;
  item->done = std::move(done);
  progress_runner_.Submit(std::move(item));
}

void PostgresStore::WriteProgressGroup(std::vector<ProgressItem*>& group) {
  WriteProgressStatement(group);
  for (ProgressItem* item : group) item->done(std::move(item->result));
}

void PostgresStore::WriteProgressStatement(std::vector<ProgressItem*>& group) {
  // Trial id order, so that concurrent statements lock rows in one order.
  std::sort(group.begin(), group.end(), [](const ProgressItem* a, const ProgressItem* b) {
    return a->request->trial_id() < b->request->trial_id();
  });
  std::vector<ProgressItem*> pending = group;
  // A trial left out of a statement's answer holds no lease, or another
  // statement (another replica) stored progress for it first: those run
  // again, the second time with their trials' rows locked beforehand, so
  // that nothing can change them between the statement's snapshot and its
  // update.
  for (int round = 0; round < 2 && !pending.empty(); ++round) {
    absl::StatusOr<std::vector<std::pair<int64_t, bool>>> written = RunProgressStatement(pending, round > 0);
    if (!written.ok()) {
      for (ProgressItem* item : pending) item->result = written.status();
      return;
    }
    std::vector<bool> stored(pending.size(), false);
    for (const auto& [i, cancelled] : *written) {
      stored[i] = true;
      pending[i]->result = ProgressResult{cancelled};
    }
    std::vector<ProgressItem*> again;
    for (size_t i = 0; i < pending.size(); ++i) {
      if (stored[i]) continue;
      const v1::ReportProgressRequest& req = *pending[i]->request;
      absl::StatusOr<v1::Trial> t = GetTrial(req.trial_id());
      if (t.ok() && t->state() == v1::TRIAL_RUNNING && t->worker_id() == req.worker_id() &&
          t->attempts() == req.attempt()) {
        pending[i]->result = absl::AbortedError(
            absl::StrCat("trial_id ", req.trial_id(), ": progress kept being written concurrently; retry"));
        again.push_back(pending[i]);
        continue;
      }
      pending[i]->result = t.ok() ? LeaseNotHeld(*t) : t.status();
    }
    pending = std::move(again);
  }
}

absl::StatusOr<std::vector<std::pair<int64_t, bool>>> PostgresStore::RunProgressStatement(
    const std::vector<ProgressItem*>& group, bool lock_first) {
  PgArrayOf<int32_t> r_i, r_attempt, r_max, r_tstep, r_vstep, r_lo, r_hi, step, g_i, g_step, g_layer;
  PgArrayOf<int64_t> r_trial, r_worker;
  PgArrayOf<double> r_tloss, r_vloss, lr, train, val, acc, gnorm, tps, g_norm;
  PgArrayOf<std::string> g_matrix;
  int32_t points = 0;  // metric points so far: the flat arrays' length
  for (size_t i = 0; i < group.size(); ++i) {
    const v1::ReportProgressRequest& req = *group[i]->request;
    const auto idx = static_cast<int32_t>(i);
    int32_t max_step = 0, train_step = -1, val_step = -1;
    double train_loss = 0, val_loss = 0;
    r_lo.Add(points + 1);  // 1-based, as SQL arrays are
    for (const v1::MetricPoint& p : MergeByStep(req)) {
      ++points;
      step.Add(p.step());
      lr.AddOptional(p.has_lr(), p.lr());
      train.AddOptional(p.has_train_loss(), p.train_loss());
      val.AddOptional(p.has_val_loss(), p.val_loss());
      acc.AddOptional(p.has_val_accuracy(), p.val_accuracy());
      gnorm.AddOptional(p.has_grad_norm(), p.grad_norm());
      tps.AddOptional(p.has_tokens_per_s(), p.tokens_per_s());
      max_step = std::max(max_step, p.step());
      if (p.has_train_loss() && p.step() > train_step) { train_step = p.step(); train_loss = p.train_loss(); }
      if (p.has_val_loss() && p.step() > val_step) { val_step = p.step(); val_loss = p.val_loss(); }
    }
    r_hi.Add(points);
    for (const v1::LayerGradNorms& g : req.layer_grad_norms()) {
      for (const v1::LayerGradNorm& n : g.norms()) {
        g_i.Add(idx);
        g_step.Add(g.step());
        g_layer.Add(n.layer());
        g_matrix.Add(n.matrix());
        g_norm.Add(n.norm());
      }
    }
    r_i.Add(idx);
    r_trial.Add(req.trial_id());
    r_worker.Add(req.worker_id());
    r_attempt.Add(req.attempt());
    r_max.Add(max_step);
    r_tstep.Add(train_step);
    r_tloss.Add(train_loss);
    r_vstep.Add(val_step);
    r_vloss.Add(val_loss);
  }
  // In the order of the statement's $1..$23, each of the type it casts to.
  PgParams p;
  p.Add(r_i).Add(r_trial).Add(r_worker).Add(r_attempt).Add(r_max).Add(r_tstep).Add(r_tloss).Add(r_vstep);
  p.Add(r_vloss).Add(r_lo).Add(r_hi).Add(step).Add(lr).Add(train).Add(val).Add(acc).Add(gnorm).Add(tps);
  p.Add(g_i).Add(g_step).Add(g_layer).Add(g_matrix).Add(g_norm);
  // One statement: the lease checks, the trials' progress and the inserts
  // commit together or not at all. A batch's steps above the trial's
  // last_step (all of them, usually) become one trial_metric_batches row,
  // sliced from the flat arrays; its other steps (a re-sent or late batch, an
  // evaluation that missed its step's batch) go to trial_metric_late one by
  // one, with only the fields that the stored batches lack (see
  // db/migrations/0005_metric_batches.sql).
  const std::string& kSql = ProgressSql();
  using Written = std::vector<std::pair<int64_t, bool>>;
  auto run = [&](PgConnection& conn) -> absl::StatusOr<Written> {
    ASSIGN_OR_RETURN(PgResult r, conn.ExecPrepared("ns_report_progress", kSql, p));
    Written out;
    for (int i = 0; i < r.rows(); ++i) out.emplace_back(r.GetInt64(i, 0), r.GetBool(i, 1));
    return out;
  };
  absl::StatusOr<Written> written;
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (lock_first) {
      absl::Status st = InTransaction(hot_pool_, [&](PgConnection& conn) -> absl::Status {
        RETURN_IF_ERROR(conn.ExecPrepared("ns_lock_trials",
                                          "SELECT 1 FROM trials WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE",
                                          PgParams().Add(r_trial))
                            .status());
        written = run(conn);
        return written.status();
      });
      if (!st.ok()) written = st;
    } else {
      written = WithConnection<Written>(hot_pool_, run);
    }
    // A deadlock with another statement (e.g. a heartbeat renewing the same
    // worker's trials) aborts this one, and so does a batch that a
    // concurrent statement stored first (unique violation on
    // trial_metric_batches); the whole group is safe to re-run.
    if (written.ok() || (written.status().code() != absl::StatusCode::kAborted &&
                         written.status().code() != absl::StatusCode::kAlreadyExists)) {
      break;
    }
  }
  return written;
}

absl::StatusOr<v1::Trial> PostgresStore::FinishTrial(const v1::FinishTrialRequest& req, absl::Time now,
                                                     bool* finished_now) {
  bool now_final = false;  // written before done is called, read after
  absl::StatusOr<v1::Trial> result = WaitFor<v1::Trial>([&](auto done) {
    FinishTrialAsync(req, now, [&now_final, done = std::move(done)](absl::StatusOr<v1::Trial> t, bool f) {
      now_final = f;
      done(std::move(t));
    });
  });
  if (finished_now != nullptr) *finished_now = now_final;
  return result;
}

void PostgresStore::FinishTrialAsync(const v1::FinishTrialRequest& req, absl::Time now, FinishDone done) {
  auto item = std::make_unique<FinishItem>();
  item->request = &req;
  item->now = now;
  item->done = std::move(done);
  finish_runner_.Submit(std::move(item));
}

void PostgresStore::FinishGroup(std::vector<FinishItem*>& group) {
  std::vector<FinishItem*> finishes;
  finishes.reserve(group.size());
  for (FinishItem* item : group) {
    if (item->request->retry()) {
      RetryStatement(*item);
    } else {
      finishes.push_back(item);
    }
  }
  if (!finishes.empty()) FinishStatement(finishes);
  for (FinishItem* item : group) item->done(std::move(item->result), item->finished_now);
}

void PostgresStore::RetryStatement(FinishItem& item) {
  const v1::FinishTrialRequest& req = *item.request;
  // The attempt is recorded and the trial re-queued, failed (its last
  // attempt) or cancelled (its sweep was) in one statement, by the rule of
  // MemoryStore::EndAttempt and ExpireLeases.
  static const std::string kSql = absl::StrCat(
      "WITH cur AS (SELECT t.id, t.attempts, t.worker_id,"
      "  CASE WHEN s.state = 'CANCELLED' THEN 'CANCELLED' WHEN t.attempts >= s.max_attempts THEN 'FAILED'"
      "  ELSE 'PENDING' END AS next_state"
      "  FROM trials t JOIN sweeps s ON s.id = t.sweep_id"
      "  WHERE t.id = $1 AND t.worker_id = $2 AND t.attempts = $3 AND t.state = 'RUNNING' FOR UPDATE OF t),"
      " a AS (INSERT INTO trial_attempts (trial_id, attempt, worker_id, ended_at, outcome, reason)"
      "  SELECT id, attempts, worker_id, " NS_TS(6) ", next_state, $4 FROM cur),"
      " u AS (UPDATE trials t SET state = cur.next_state,"
      "  error = CASE WHEN cur.next_state = 'FAILED' THEN $5 ELSE t.error END,"
      "  worker_id = CASE WHEN cur.next_state = 'PENDING' THEN NULL ELSE t.worker_id END,"
      "  lease_expires_at = NULL,"
      "  finished_at = CASE WHEN cur.next_state = 'PENDING' THEN NULL ELSE " NS_TS(6) " END,"
      "  update_seq = nextval('trial_update_seq')"
      "  FROM cur WHERE t.id = cur.id RETURNING ", kTrialColumns, ", t.sweep_id AS ns_sweep_id),"
      " d AS (SELECT ns_sweep_id AS sweep_id, count(*) AS n, " NS_TS(6) " AS finished_at FROM u"
      "  WHERE (SELECT next_state FROM cur) <> 'PENDING' GROUP BY ns_sweep_id),",
      kCloseOpenTrials, " SELECT * FROM u");
  const std::string& reason = req.result().error();
  PgParams p;
  p.Add(req.trial_id()).Add(req.worker_id()).Add(static_cast<int64_t>(req.attempt())).Add(reason);
  p.Add(RetriedAttemptError(reason, req.attempt())).AddMicros(item.now);
  absl::StatusOr<v1::Trial> retried = WithConnection<v1::Trial>(pool_, [&](PgConnection& conn) -> absl::StatusOr<v1::Trial> {
    ASSIGN_OR_RETURN(PgResult r, conn.Exec(kSql, p));
    if (r.rows() == 1) {
      ASSIGN_OR_RETURN(v1::Trial t, ParseTrial(r, 0));
      item.finished_now = true;
      return t;
    }
    // Not written: a re-sent retry of this lease is a no-op, anything else
    // is a lease the worker no longer holds.
    ASSIGN_OR_RETURN(PgResult seen, conn.Exec(
        "SELECT 1 FROM trial_attempts WHERE trial_id = $1 AND attempt = $2 AND worker_id = $3",
        PgParams().Add(req.trial_id()).Add(static_cast<int64_t>(req.attempt())).Add(req.worker_id())));
    ASSIGN_OR_RETURN(PgResult tr, conn.Exec(absl::StrCat("SELECT ", kTrialColumns, " FROM trials t WHERE t.id = $1"),
                                            PgParams().Add(req.trial_id())));
    if (tr.rows() == 0) return NoTrial(req.trial_id());
    ASSIGN_OR_RETURN(v1::Trial t, ParseTrial(tr, 0));
    if (seen.rows() == 0) return LeaseNotHeld(t);
    return t;
  });
  item.result = std::move(retried);
}

void PostgresStore::FinishStatement(std::vector<FinishItem*>& group) {
  std::sort(group.begin(), group.end(), [](const FinishItem* a, const FinishItem* b) {
    return a->request->trial_id() < b->request->trial_id();
  });
  PgArrayOf<int32_t> idx, attempt, ds;
  PgArrayOf<int64_t> trial, worker, now;
  PgArrayOf<double> fvl, bvl, ftl, fva, tps;
  PgArrayOf<std::string> outcome, err;
  for (size_t i = 0; i < group.size(); ++i) {
    const v1::FinishTrialRequest& req = *group[i]->request;
    const v1::TrialResult& res = req.result();
    idx.Add(static_cast<int32_t>(i));
    trial.Add(req.trial_id());
    worker.Add(req.worker_id());
    attempt.Add(req.attempt());
    outcome.Add(TrialStateName(req.outcome()));
    fvl.AddOptional(res.has_final_val_loss(), res.final_val_loss());
    bvl.AddOptional(res.has_best_val_loss(), res.best_val_loss());
    ftl.AddOptional(res.has_final_train_loss(), res.final_train_loss());
    fva.AddOptional(res.has_final_val_accuracy(), res.final_val_accuracy());
    ds.AddOptional(res.has_diverged_step(), res.diverged_step());
    tps.AddOptional(res.has_tokens_per_s(), res.tokens_per_s());
    err.Add(res.error());
    now.Add(absl::ToUnixMicros(group[i]->now));
  }
  // In the order of the statement's $1..$13, each of the type it casts to.
  PgParams p;
  p.Add(idx).Add(trial).Add(worker).Add(attempt).Add(outcome).Add(fvl).Add(bvl).Add(ftl).Add(fva).Add(ds);
  p.Add(tps).Add(err).Add(now);
  const std::string& kSql = FinishSql();
  std::vector<bool> written(group.size(), false);
  absl::Status status;
  for (int attempt = 0; attempt < 3; ++attempt) {
    status = WithConnection<bool>(hot_pool_, [&](PgConnection& conn) -> absl::StatusOr<bool> {
      ASSIGN_OR_RETURN(PgResult r, conn.ExecPrepared("ns_finish_trials", kSql, p));
      for (int row = 0; row < r.rows(); ++row) {
        const int64_t i = r.GetInt64(row, 0);
        ASSIGN_OR_RETURN(v1::Trial t, ParseTrial(r, row, 1));
        written[i] = true;
        group[i]->finished_now = true;
        group[i]->result = std::move(t);
      }
      return true;
    }).status();
    // A deadlock aborts the statement as a whole; it is safe to run again.
    if (status.code() != absl::StatusCode::kAborted) break;
  }
  if (!status.ok()) {
    for (FinishItem* item : group) item->result = status;
    return;
  }
  for (size_t i = 0; i < group.size(); ++i) {
    if (written[i]) continue;
    const v1::FinishTrialRequest& req = *group[i]->request;
    absl::StatusOr<v1::Trial> t = GetTrial(req.trial_id());
    if (t.ok() && IsFinal(t->state()) && t->worker_id() == req.worker_id() && t->attempts() == req.attempt() &&
        t->state() == req.outcome()) {
      group[i]->result = std::move(t);  // a re-sent FinishTrial
    } else {
      group[i]->result = t.ok() ? LeaseNotHeld(*t) : t.status();
    }
  }
}

absl::StatusOr<ExpiryResult> PostgresStore::ExpireLeases(absl::Time now) {
  return WithConnection<ExpiryResult>(pool_, [&](PgConnection& conn) -> absl::StatusOr<ExpiryResult> {
    ASSIGN_OR_RETURN(PgResult r, conn.Exec(absl::StrCat(
        // The expired leases' holders, read before the update clears them.
        "WITH cur AS (SELECT id, attempts, worker_id FROM trials"
        " WHERE state = 'RUNNING' AND lease_expires_at < " NS_TS(1) " FOR UPDATE),"
        " expired AS (UPDATE trials t SET"
        " state = CASE WHEN s.state = 'CANCELLED' THEN 'CANCELLED'"
        "  WHEN t.attempts >= s.max_attempts THEN 'FAILED' ELSE 'PENDING' END,"
        " error = CASE WHEN s.state <> 'CANCELLED' AND t.attempts >= s.max_attempts"
        "  THEN 'lease expired after ' || t.attempts || ' attempts' ELSE t.error END,"
        " worker_id = CASE WHEN s.state <> 'CANCELLED' AND t.attempts < s.max_attempts THEN NULL"
        "  ELSE t.worker_id END,"
        " finished_at = CASE WHEN s.state = 'CANCELLED' OR t.attempts >= s.max_attempts THEN " NS_TS(1)
        "  ELSE NULL END,"
        " lease_expires_at = NULL, update_seq = nextval('trial_update_seq')"
        " FROM sweeps s, cur WHERE s.id = t.sweep_id AND t.id = cur.id"
        " RETURNING t.id, t.state, t.sweep_id, cur.attempts, cur.worker_id),"
        " a AS (INSERT INTO trial_attempts (trial_id, attempt, worker_id, ended_at, outcome, reason)"
        " SELECT id, attempts, worker_id, " NS_TS(1) ", state, 'lease expired' FROM expired),"
        // Those made final leave their sweeps' open trials.
        " d AS (SELECT sweep_id, count(*) AS n, " NS_TS(1) " AS finished_at FROM expired"
        " WHERE state <> 'PENDING' GROUP BY sweep_id),",
        kCloseOpenTrials, " SELECT state, count(*) FROM expired GROUP BY state"),
        PgParams().AddMicros(now)));
    ExpiryResult result;
    for (int i = 0; i < r.rows(); ++i) {
      int n = static_cast<int>(r.GetInt64(i, 1));
      switch (TrialStateFromName(r.GetString(i, 0))) {
        case v1::TRIAL_PENDING: result.requeued = n; break;
        case v1::TRIAL_FAILED: result.failed = n; break;
        case v1::TRIAL_CANCELLED: result.cancelled = n; break;
        default: break;
      }
    }
    RETURN_IF_ERROR(CompleteSweeps(conn, {}, now));
    return result;
  });
}

absl::StatusOr<StoreStats> PostgresStore::Stats(absl::Time live_since) {
  return WithConnection<StoreStats>(pool_, [&](PgConnection& conn) -> absl::StatusOr<StoreStats> {
    StoreStats stats;
    ASSIGN_OR_RETURN(PgResult t, conn.Exec("SELECT state, count(*) FROM trials GROUP BY state"));
    for (int i = 0; i < t.rows(); ++i) {
      v1::TrialState state = TrialStateFromName(t.GetString(i, 0));
      AddToCounts(state, &stats.trials, t.GetInt64(i, 1));
    }
    ASSIGN_OR_RETURN(PgResult s, conn.Exec("SELECT state, count(*) FROM sweeps GROUP BY state"));
    for (int i = 0; i < s.rows(); ++i) {
      int n = static_cast<int>(s.GetInt64(i, 1));
      switch (SweepStateFromName(s.GetString(i, 0))) {
        case v1::SWEEP_RUNNING: stats.sweeps_running = n; break;
        case v1::SWEEP_COMPLETED: stats.sweeps_completed = n; break;
        case v1::SWEEP_CANCELLED: stats.sweeps_cancelled = n; break;
        default: break;
      }
    }
    ASSIGN_OR_RETURN(PgResult w, conn.Exec("SELECT count(*) FROM workers WHERE last_heartbeat_at >= " NS_TS(1)
                                           " AND superseded_by IS NULL",
                                           PgParams().AddMicros(live_since)));
    stats.live_workers = static_cast<int>(w.GetInt64(0, 0));
    return stats;
  });
}

absl::StatusOr<std::vector<v1::Worker>> PostgresStore::ListWorkers(absl::Time live_since, bool live_only) {
  using Out = std::vector<v1::Worker>;
  return WithConnection<Out>(pool_, [&](PgConnection& conn) -> absl::StatusOr<Out> {
    // One row per (worker, device) in device order; a worker without devices
    // has one row with a NULL device. One statement, so one snapshot.
    ASSIGN_OR_RETURN(PgResult r, conn.Exec(
        "WITH running AS (SELECT worker_id, count(*) AS n FROM trials WHERE state = 'RUNNING'"
        " AND worker_id IS NOT NULL GROUP BY worker_id)"
        " SELECT w.id, w.name, w.hostname, " NS_MICROS("w.registered_at") ", " NS_MICROS("w.last_heartbeat_at")
        ", w.last_heartbeat_at >= " NS_TS(1) " AND w.superseded_by IS NULL, COALESCE(running.n, 0), d.device,"
        " COALESCE(w.superseded_by, 0)"
        " FROM workers w LEFT JOIN running ON running.worker_id = w.id"
        " LEFT JOIN LATERAL unnest(w.devices) WITH ORDINALITY AS d(device, n) ON true"
        " WHERE NOT $2::boolean OR (w.last_heartbeat_at >= " NS_TS(1) " AND w.superseded_by IS NULL)"
        " ORDER BY w.id, d.n",
        PgParams().AddMicros(live_since).Add(live_only)));
    Out out;
    for (int i = 0; i < r.rows(); ++i) {
      const int64_t id = r.GetInt64(i, 0);
      if (out.empty() || out.back().id() != id) {
        v1::Worker& w = out.emplace_back();
        w.set_id(id);
        w.set_name(r.GetString(i, 1));
        w.set_hostname(r.GetString(i, 2));
        NS_SET_TIME(r, i, 3, w, registered_at);
        NS_SET_TIME(r, i, 4, w, last_heartbeat_at);
        w.set_live(r.GetBool(i, 5));
        w.set_running_trials(static_cast<int32_t>(r.GetInt64(i, 6)));
        w.set_superseded_by(r.GetInt64(i, 8));
      }
      if (!r.IsNull(i, 7)) out.back().add_devices(r.GetString(i, 7));
    }
    return out;
  });
}

}  // namespace normsweep::db

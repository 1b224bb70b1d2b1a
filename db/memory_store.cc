#include "db/memory_store.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/time_util.h"
#include "proto/schema/boundary_search.h"
#include "proto/schema/interruptions.h"

namespace normsweep::db {
namespace {

using google::protobuf::util::TimeUtil;
// The boundary search's rule (proto/schema/boundary_search.h).
using schema::BoundarySettings;
using schema::BoundarySettingsOf;
using schema::ClassifyProbe;
using schema::DecideLine;
using schema::LineDecision;
using schema::Probe;

google::protobuf::Timestamp ToProto(absl::Time t) {
  return TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(t));  // as PostgreSQL keeps it
}

absl::Time FromProto(const google::protobuf::Timestamp& t) {
  return absl::FromUnixMicros(TimeUtil::TimestampToMicroseconds(t));
}

bool HoldsLease(const v1::Trial& t, int64_t worker_id, int32_t attempt) {
  return t.state() == v1::TRIAL_RUNNING && t.worker_id() == worker_id && t.attempts() == attempt;
}

absl::Status LeaseNotHeld(const v1::Trial& t) {
  return absl::FailedPreconditionError(absl::StrCat("trial_id ", t.id(), ": lease not held (state ",
                                                    TrialStateName(t.state()), ", attempt ",
                                                    t.attempts(), ")"));
}

}  // namespace

v1::Sweep MemoryStore::SweepWithCounts(const v1::Sweep& sweep) const {
  v1::Sweep s = sweep;
  v1::TrialCounts counts;
  for (const auto& [id, t] : trials_) {
    if (t.trial.sweep_id() == sweep.id()) AddToCounts(t.trial.state(), &counts);
  }
  *s.mutable_counts() = counts;
  return s;
}

void MemoryStore::MaybeComplete(int64_t sweep_id, absl::Time now) {
  auto it = sweeps_.find(sweep_id);
  if (it == sweeps_.end() || it->second.sweep.state() != v1::SWEEP_RUNNING) return;
  for (const auto& [id, t] : trials_) {
    if (t.trial.sweep_id() == sweep_id && !IsFinal(t.trial.state())) return;
  }
  it->second.sweep.set_state(v1::SWEEP_COMPLETED);
  *it->second.sweep.mutable_finished_at() = ToProto(now);
}

absl::StatusOr<CreateSweepResult> MemoryStore::CreateSweep(const std::string& request_id,
                                                           const v1::SweepSpec& requested,
                                                           const std::vector<NewTrial>& trials,
                                                           absl::Time now, const std::string& submitted_by) {
  const v1::SweepSpec spec = StoredSpec(requested);
  absl::MutexLock lock(&mu_);
  if (!request_id.empty()) {
    auto it = sweep_by_request_.find(request_id);
    if (it != sweep_by_request_.end()) {
      const v1::Sweep& existing = sweeps_.at(it->second).sweep;
      std::string a, b;
      existing.spec().SerializeToString(&a);
      spec.SerializeToString(&b);
      if (a != b) {
        return absl::AlreadyExistsError(absl::StrCat(
            "request_id '", request_id, "': already used for sweep ", existing.id(), " with a different spec"));
      }
      return CreateSweepResult{SweepWithCounts(existing), false};
    }
  }
  v1::Sweep sweep;
  sweep.set_id(next_sweep_id_++);
  sweep.set_name(spec.name());
  *sweep.mutable_spec() = spec;
  sweep.set_state(v1::SWEEP_RUNNING);
  sweep.set_request_id(request_id);
  sweep.set_trial_count(static_cast<int32_t>(trials.size()));
  *sweep.mutable_created_at() = ToProto(now);
  sweep.set_submitted_by(submitted_by);
  for (const NewTrial& nt : trials) {
    StoredTrial st;
    v1::Trial& t = st.trial;
    t.set_id(next_trial_id_++);
    t.set_sweep_id(sweep.id());
    t.set_index(nt.index);
    *t.mutable_config() = nt.config;
    t.set_variant(nt.variant);
    if (nt.boundary_line.has_value()) t.set_boundary_line(*nt.boundary_line);
    t.set_state(v1::TRIAL_PENDING);
    *t.mutable_created_at() = ToProto(now);
    Touch(st);
    trials_[t.id()] = std::move(st);
  }
  sweeps_[sweep.id()] = StoredSweep{sweep};
  if (!request_id.empty()) sweep_by_request_[request_id] = sweep.id();
  if (trials.empty()) MaybeComplete(sweep.id(), now);
  return CreateSweepResult{SweepWithCounts(sweeps_[sweep.id()].sweep), true};
}

absl::StatusOr<v1::Sweep> MemoryStore::GetSweep(int64_t sweep_id) {
  absl::MutexLock lock(&mu_);
  auto it = sweeps_.find(sweep_id);
  if (it == sweeps_.end()) return NoSweep(sweep_id);
  return SweepWithCounts(it->second.sweep);
}

absl::StatusOr<std::vector<v1::Sweep>> MemoryStore::ListSweeps(v1::SweepState state,
                                                               int64_t before_id, int limit) {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Sweep> out;
  for (auto it = sweeps_.rbegin(); it != sweeps_.rend() && static_cast<int>(out.size()) < limit; ++it) {
    if (before_id > 0 && it->first >= before_id) continue;
    if (state != v1::SWEEP_STATE_UNSPECIFIED && it->second.sweep.state() != state) continue;
    out.push_back(SweepWithCounts(it->second.sweep));
  }
  return out;
}

absl::StatusOr<v1::Sweep> MemoryStore::CancelSweep(int64_t sweep_id, absl::Time now,
                                                   const std::string& cancelled_by, int* cancelled_trials) {
  absl::MutexLock lock(&mu_);
  int cancelled = 0;
  auto it = sweeps_.find(sweep_id);
  if (it == sweeps_.end()) return NoSweep(sweep_id);
  v1::Sweep& sweep = it->second.sweep;
  if (sweep.state() == v1::SWEEP_RUNNING) {
    sweep.set_state(v1::SWEEP_CANCELLED);
    *sweep.mutable_finished_at() = ToProto(now);
    sweep.set_cancelled_by(cancelled_by);
    for (auto& [id, t] : trials_) {
      if (t.trial.sweep_id() == sweep_id && t.trial.state() == v1::TRIAL_PENDING) {
        t.trial.set_state(v1::TRIAL_CANCELLED);
        *t.trial.mutable_finished_at() = ToProto(now);
        Touch(t);
        ++cancelled;
      }
    }
  }
  if (cancelled_trials != nullptr) *cancelled_trials = cancelled;
  return SweepWithCounts(sweep);
}

absl::StatusOr<std::vector<v1::Trial>> MemoryStore::ListTrials(int64_t sweep_id,
                                                               v1::TrialState state,
                                                               int32_t after_index, int limit) {
  absl::MutexLock lock(&mu_);
  if (!sweeps_.contains(sweep_id)) return NoSweep(sweep_id);
  std::vector<v1::Trial> out;
  for (const auto& [id, t] : trials_) {
    if (t.trial.sweep_id() != sweep_id || t.trial.index() <= after_index) continue;
    if (state != v1::TRIAL_STATE_UNSPECIFIED && t.trial.state() != state) continue;
    out.push_back(t.trial);
  }
  std::sort(out.begin(), out.end(),
            [](const v1::Trial& a, const v1::Trial& b) { return a.index() < b.index(); });
  if (static_cast<int>(out.size()) > limit) out.resize(limit);
  return out;
}

absl::StatusOr<std::vector<std::pair<v1::Trial, int64_t>>> MemoryStore::TrialsChangedSince(
    int64_t sweep_id, int64_t after_seq) {
  absl::MutexLock lock(&mu_);
  if (!sweeps_.contains(sweep_id)) return NoSweep(sweep_id);
  std::vector<std::pair<v1::Trial, int64_t>> out;
  for (const auto& [id, t] : trials_) {
    if (t.trial.sweep_id() == sweep_id && t.seq > after_seq) out.emplace_back(t.trial, t.seq);
  }
  return out;
}

absl::StatusOr<v1::Trial> MemoryStore::GetTrial(int64_t trial_id) {
  absl::MutexLock lock(&mu_);
  auto it = trials_.find(trial_id);
  if (it == trials_.end()) return NoTrial(trial_id);
  return it->second.trial;
}

absl::StatusOr<TrialHistory> MemoryStore::GetTrialHistory(int64_t trial_id) {
  absl::MutexLock lock(&mu_);
  if (!trials_.contains(trial_id)) return NoTrial(trial_id);
  TrialHistory h;
  for (auto it = metrics_.lower_bound({trial_id, INT32_MIN});
       it != metrics_.end() && it->first.first == trial_id; ++it) {
    h.metrics.push_back(it->second);
  }
  for (const auto& [key, norm] : grad_norms_) {
    const auto& [tid, step, layer, matrix] = key;
    if (tid != trial_id) continue;
    if (h.layer_grad_norms.empty() || h.layer_grad_norms.back().step() != step) {
      h.layer_grad_norms.emplace_back().set_step(step);
    }
    v1::LayerGradNorm* n = h.layer_grad_norms.back().add_norms();
    n->set_layer(layer);
    n->set_matrix(matrix);
    n->set_norm(norm);
  }
  for (auto it = diagnostics_.lower_bound({trial_id, INT32_MIN, INT32_MIN});
       it != diagnostics_.end() && std::get<0>(it->first) == trial_id; ++it) {
    const int32_t step = std::get<1>(it->first);
    if (h.diagnostics.empty() || h.diagnostics.back().step() != step) h.diagnostics.emplace_back().set_step(step);
    *h.diagnostics.back().add_layers() = it->second;
  }
  for (auto it = attempts_.lower_bound({trial_id, INT32_MIN}); it != attempts_.end() && it->first.first == trial_id;
       ++it) {
    h.attempts.push_back(it->second);
  }
  return h;
}

absl::StatusOr<int64_t> MemoryStore::RegisterWorker(const v1::RegisterWorkerRequest& request,
                                                    absl::Time now) {
  absl::MutexLock lock(&mu_);
  int64_t id = next_worker_id_++;
  for (auto& [old_id, w] : workers_) {
    if (w.superseded_by == 0 && w.info.name() == request.name() && w.info.hostname() == request.hostname()) {
      w.superseded_by = id;
      // Its leases end now (see db/sql/register_worker.sql).
      for (auto& [trial_id, st] : trials_) {
        if (st.trial.state() == v1::TRIAL_RUNNING && st.trial.worker_id() == old_id) {
          *st.trial.mutable_lease_expires_at() = ToProto(now - absl::Microseconds(1));
        }
      }
    }
  }
  workers_[id] = StoredWorker{request, now, now};
  return id;
}

absl::StatusOr<std::optional<v1::Trial>> MemoryStore::LeaseTrial(int64_t worker_id,
                                                                 absl::Time now,
                                                                 absl::Duration lease) {
  absl::MutexLock lock(&mu_);
  auto w = workers_.find(worker_id);
  if (w == workers_.end()) return NoWorker(worker_id);
  // Running trials per sweep, for max_concurrent_trials.
  std::map<int64_t, int> running;
  for (const auto& [id, t] : trials_) {
    if (t.trial.state() == v1::TRIAL_RUNNING) ++running[t.trial.sweep_id()];
  }
  StoredTrial* best = nullptr;
  int best_priority = 0;
  for (auto& [id, t] : trials_) {  // ascending id: the oldest first
    if (t.trial.state() != v1::TRIAL_PENDING) continue;
    const v1::Sweep& s = sweeps_.at(t.trial.sweep_id()).sweep;
    if (s.state() != v1::SWEEP_RUNNING) continue;
    int limit = s.spec().max_concurrent_trials();
    if (limit > 0 && running[s.id()] >= limit) continue;
    if (best == nullptr || s.spec().priority() > best_priority) {
      best = &t;
      best_priority = s.spec().priority();
    }
  }
  if (best == nullptr) return std::optional<v1::Trial>();
  TakeLease(*best, worker_id, now, lease);
  return std::optional<v1::Trial>(best->trial);
}

absl::StatusOr<std::vector<v1::Trial>> MemoryStore::LeaseTrialsById(int64_t worker_id, int64_t sweep_id,
                                                                    const std::vector<int64_t>& trial_ids,
                                                                    absl::Time now, absl::Duration lease) {
  absl::MutexLock lock(&mu_);
  if (!workers_.contains(worker_id)) return NoWorker(worker_id);
  auto s = sweeps_.find(sweep_id);
  if (s == sweeps_.end()) return NoSweep(sweep_id);
  std::vector<v1::Trial> leased;
  if (s->second.sweep.state() != v1::SWEEP_RUNNING) return leased;
  std::vector<StoredTrial*> pending;
  for (int64_t id : trial_ids) {
    auto it = trials_.find(id);
    if (it == trials_.end() || it->second.trial.sweep_id() != sweep_id) continue;
    if (it->second.trial.state() == v1::TRIAL_PENDING) pending.push_back(&it->second);
  }
  std::sort(pending.begin(), pending.end(),
            [](const StoredTrial* a, const StoredTrial* b) { return a->trial.index() < b->trial.index(); });
  pending.erase(std::unique(pending.begin(), pending.end()), pending.end());
  size_t room = pending.size();
  if (const int limit = s->second.sweep.spec().max_concurrent_trials(); limit > 0) {
    int running = 0;
    for (const auto& [id, t] : trials_) {
      if (t.trial.sweep_id() == sweep_id && t.trial.state() == v1::TRIAL_RUNNING) ++running;
    }
    room = std::min(room, static_cast<size_t>(std::max(0, limit - running)));
  }
  for (size_t i = 0; i < room; ++i) {
    TakeLease(*pending[i], worker_id, now, lease);
    leased.push_back(pending[i]->trial);
  }
  return leased;
}

void MemoryStore::TakeLease(StoredTrial& stored, int64_t worker_id, absl::Time now, absl::Duration lease) {
  v1::Trial& t = stored.trial;
  t.set_state(v1::TRIAL_RUNNING);
  t.set_attempts(t.attempts() + 1);
  t.set_worker_id(worker_id);
  *t.mutable_lease_expires_at() = ToProto(now + lease);
  if (!t.has_started_at()) *t.mutable_started_at() = ToProto(now);
  t.set_last_step(0);
  t.clear_last_train_loss();
  t.clear_last_val_loss();
  if (t.attempts() > 1) {  // a retry starts its history afresh
    metrics_.erase(metrics_.lower_bound({t.id(), INT32_MIN}), metrics_.lower_bound({t.id() + 1, INT32_MIN}));
    std::erase_if(grad_norms_, [&](const auto& kv) { return std::get<0>(kv.first) == t.id(); });
    diagnostics_.erase(diagnostics_.lower_bound({t.id(), INT32_MIN, INT32_MIN}),
                       diagnostics_.lower_bound({t.id() + 1, INT32_MIN, INT32_MIN}));
  }
  Touch(stored);
}

absl::StatusOr<HeartbeatResult> MemoryStore::Heartbeat(int64_t worker_id,
                                                       const std::vector<v1::TrialLease>& leases,
                                                       absl::Time now, absl::Duration lease) {
  absl::MutexLock lock(&mu_);
  auto w = workers_.find(worker_id);
  if (w == workers_.end()) return NoWorker(worker_id);
  w->second.last_heartbeat = now;
  HeartbeatResult result;
  for (const v1::TrialLease& l : leases) {
    auto it = trials_.find(l.trial_id());
    if (it == trials_.end() || !HoldsLease(it->second.trial, worker_id, l.attempt())) {
      result.lost_trial_ids.push_back(l.trial_id());
      continue;
    }
    *it->second.trial.mutable_lease_expires_at() = ToProto(now + lease);
    if (sweeps_.at(it->second.trial.sweep_id()).sweep.state() == v1::SWEEP_CANCELLED) {
      result.cancelled_trial_ids.push_back(l.trial_id());
    }
  }
  return result;
}

absl::StatusOr<ProgressResult> MemoryStore::ReportProgress(const v1::ReportProgressRequest& req,
                                                           absl::Time now) {
  absl::MutexLock lock(&mu_);
  auto it = trials_.find(req.trial_id());
  if (it == trials_.end()) return NoTrial(req.trial_id());
  v1::Trial& t = it->second.trial;
  if (!HoldsLease(t, req.worker_id(), req.attempt())) return LeaseNotHeld(t);
  int32_t old_last = t.last_step();
  int32_t max_step = old_last;
  int32_t train_step = -1, val_step = -1;
  double train_loss = 0, val_loss = 0;
  const int64_t seq = ++seq_;  // ExportSweep's x of the rows written here
  for (const v1::MetricPoint& p : req.points()) {
    auto [m, inserted] = metrics_.try_emplace({t.id(), p.step()}, p);
    if (!inserted) {
      const std::string before = m->second.SerializeAsString();
      MergeMetricPoint(p, &m->second);  // keep stored values, fill the empty ones
      inserted = m->second.SerializeAsString() != before;
    }
    if (inserted) StampExport(ExportTable::kMetrics, t.id(), p.step(), 0, seq);
    max_step = std::max(max_step, p.step());
    if (p.has_train_loss() && p.step() > train_step) { train_step = p.step(); train_loss = p.train_loss(); }
    if (p.has_val_loss() && p.step() > val_step) { val_step = p.step(); val_loss = p.val_loss(); }
  }
  for (const v1::LayerGradNorms& g : req.layer_grad_norms()) {
    for (const v1::LayerGradNorm& n : g.norms()) {
      if (grad_norms_.try_emplace({t.id(), g.step(), n.layer(), n.matrix()}, n.norm()).second) {
        StampExport(ExportTable::kGradNorms, t.id(), g.step(), n.layer(), seq);
      }
    }
  }
  for (const v1::StepDiagnostics& d : req.diagnostics()) {
    for (const v1::LayerDiagnostics& l : d.layers()) {
      if (diagnostics_.try_emplace({t.id(), d.step(), l.layer()}, l).second) {
        StampExport(ExportTable::kDiagnostics, t.id(), d.step(), l.layer(), seq);
      }
    }
  }
  t.set_last_step(max_step);
  if (train_step >= 0 && train_step >= old_last) t.set_last_train_loss(train_loss);
  if (val_step >= 0 && val_step >= old_last) t.set_last_val_loss(val_loss);
  Touch(it->second);
  return ProgressResult{sweeps_.at(t.sweep_id()).sweep.state() == v1::SWEEP_CANCELLED};
}

absl::StatusOr<v1::Trial> MemoryStore::FinishTrial(const v1::FinishTrialRequest& req,
                                                   absl::Time now, bool* finished_now) {
  absl::MutexLock lock(&mu_);
  if (finished_now != nullptr) *finished_now = false;
  auto it = trials_.find(req.trial_id());
  if (it == trials_.end()) return NoTrial(req.trial_id());
  v1::Trial& t = it->second.trial;
  if (req.retry()) {
    auto a = attempts_.find({t.id(), req.attempt()});
    if (a != attempts_.end() && a->second.worker_id() == req.worker_id()) {  // a re-sent retry
      // The worker names the cause of an interruption better than the
      // scheduler that found its lease expired.
      if (!req.interruption().empty() && !a->second.interruption().empty()) {
        a->second.set_interruption(req.interruption());
        StampExport(ExportTable::kAttempts, t.id(), req.attempt(), 0, ++seq_);
      }
      return t;
    }
    if (!HoldsLease(t, req.worker_id(), req.attempt())) return LeaseNotHeld(t);
    EndAttempt(it->second, req.result().error(), req.interruption(), now);
    if (finished_now != nullptr) *finished_now = true;
    return t;
  }
  if (IsFinal(t.state()) && t.worker_id() == req.worker_id() && t.attempts() == req.attempt() &&
      t.state() == req.outcome()) {
    return t;  // a re-sent FinishTrial
  }
  if (!HoldsLease(t, req.worker_id(), req.attempt())) return LeaseNotHeld(t);
  t.set_state(req.outcome());
  if (finished_now != nullptr) *finished_now = true;
  *t.mutable_result() = req.result();
  t.clear_lease_expires_at();
  *t.mutable_finished_at() = ToProto(now);
  Touch(it->second);
  if (t.has_boundary_line()) AdvanceBoundaryLine(t, now);
  MaybeComplete(t.sweep_id(), now);
  return t;
}

v1::TrialState MemoryStore::EndAttempt(StoredTrial& st, const std::string& reason, const std::string& cause,
                                       absl::Time now) {
  v1::Trial& t = st.trial;
  const v1::Sweep& s = sweeps_.at(t.sweep_id()).sweep;
  v1::TrialAttempt& a = attempts_[{t.id(), t.attempts()}];
  a.set_attempt(t.attempts());
  a.set_worker_id(t.worker_id());
  *a.mutable_ended_at() = ToProto(now);
  a.set_reason(reason);
  a.set_interruption(cause);
  StampExport(ExportTable::kAttempts, t.id(), t.attempts(), 0, ++seq_);
  t.clear_lease_expires_at();
  if (!cause.empty()) t.set_interruptions(t.interruptions() + 1);
  const int own = t.attempts() - t.interruptions();
  if (s.state() == v1::SWEEP_CANCELLED) {
    t.set_state(v1::TRIAL_CANCELLED);
    *t.mutable_finished_at() = ToProto(now);
  } else if (cause.empty() ? own >= s.spec().max_attempts() : t.interruptions() >= s.spec().max_interruptions()) {
    t.set_state(v1::TRIAL_FAILED);
    t.mutable_result()->set_error(cause.empty() ? RetriedAttemptError(reason, own)
                                                : InterruptedError(cause, t.interruptions()));
    *t.mutable_finished_at() = ToProto(now);
  } else {
    t.set_state(v1::TRIAL_PENDING);
    t.set_worker_id(0);
  }
  a.set_outcome(t.state());
  Touch(st);
  if (IsFinal(t.state())) MaybeComplete(t.sweep_id(), now);
  return t.state();
}

absl::StatusOr<ExpiryResult> MemoryStore::ExpireLeases(absl::Time now, const Outage& outage) {
  absl::MutexLock lock(&mu_);
  ExpiryResult result;
  const auto now_proto = ToProto(now);
  for (auto& [id, st] : trials_) {
    v1::Trial& t = st.trial;
    if (t.state() != v1::TRIAL_RUNNING || !(t.lease_expires_at() < now_proto)) continue;
    const absl::Time expired_at = FromProto(t.lease_expires_at());
    auto w = workers_.find(t.worker_id());
    const bool superseded = w != workers_.end() && w->second.superseded_by != 0;
    const std::string cause(!superseded && expired_at >= outage.from && expired_at <= outage.until
                                ? schema::kLeaseLost
                                : schema::kWorkerLost);
    ++result.interruptions[cause];
    switch (EndAttempt(st, "lease expired", cause, now)) {
      case v1::TRIAL_CANCELLED: ++result.cancelled; break;
      case v1::TRIAL_FAILED: ++result.failed; break;
      default: ++result.requeued; break;
    }
  }
  for (const auto& [id, s] : sweeps_) {
    (void)s;
    MaybeComplete(id, now);
  }
  return result;
}

absl::StatusOr<StoreStats> MemoryStore::Stats(absl::Time live_since) {
  absl::MutexLock lock(&mu_);
  StoreStats stats;
  for (const auto& [id, t] : trials_) AddToCounts(t.trial.state(), &stats.trials);
  for (const auto& [id, s] : sweeps_) {
    switch (s.sweep.state()) {
      case v1::SWEEP_RUNNING: ++stats.sweeps_running; break;
      case v1::SWEEP_COMPLETED: ++stats.sweeps_completed; break;
      case v1::SWEEP_CANCELLED: ++stats.sweeps_cancelled; break;
      default: break;
    }
  }
  for (const auto& [id, w] : workers_) {
    if (w.last_heartbeat >= live_since && w.superseded_by == 0) ++stats.live_workers;
  }
  return stats;
}

absl::StatusOr<std::vector<v1::Worker>> MemoryStore::ListWorkers(absl::Time live_since, bool live_only) {
  absl::MutexLock lock(&mu_);
  std::map<int64_t, int32_t> running;  // worker id -> RUNNING trials
  for (const auto& [id, t] : trials_) {
    if (t.trial.state() == v1::TRIAL_RUNNING) ++running[t.trial.worker_id()];
  }
  std::vector<v1::Worker> out;
  for (const auto& [id, w] : workers_) {  // ascending id
    const bool live = w.last_heartbeat >= live_since && w.superseded_by == 0;
    if (live_only && !live) continue;
    v1::Worker& worker = out.emplace_back();
    worker.set_id(id);
    worker.set_name(w.info.name());
    worker.set_hostname(w.info.hostname());
    *worker.mutable_devices() = w.info.devices();
    *worker.mutable_registered_at() = ToProto(w.registered_at);
    *worker.mutable_last_heartbeat_at() = ToProto(w.last_heartbeat);
    worker.set_live(live);
    worker.set_running_trials(running[id]);
    worker.set_superseded_by(w.superseded_by);
  }
  return out;
}

absl::StatusOr<std::vector<WorkerSpeeds>> MemoryStore::RecentTrialSpeeds(absl::Time live_since, int per_worker) {
  absl::MutexLock lock(&mu_);
  std::vector<WorkerSpeeds> out;
  for (const auto& [id, w] : workers_) {  // ascending id
    if (w.last_heartbeat < live_since || w.superseded_by != 0) continue;
    std::vector<const v1::Trial*> finished;
    for (const auto& [trial_id, st] : trials_) {
      const v1::Trial& t = st.trial;
      if (t.state() != v1::TRIAL_SUCCEEDED || !t.has_finished_at() || !(t.result().tokens_per_s() > 0)) continue;
      auto by = workers_.find(t.worker_id());
      if (by != workers_.end() && by->second.info.name() == w.info.name() &&
          by->second.info.hostname() == w.info.hostname()) {
        finished.push_back(&t);
      }
    }
    auto newest_first = [](const v1::Trial* a, const v1::Trial* b) {
      auto key = [](const v1::Trial* t) {
        return std::make_tuple(t->finished_at().seconds(), t->finished_at().nanos(), t->id());
      };
      return key(a) > key(b);
    };
    std::sort(finished.begin(), finished.end(), newest_first);
    if (finished.empty()) continue;
    WorkerSpeeds& speeds = out.emplace_back();
    speeds.worker_id = id;
    for (size_t i = 0; i < finished.size() && static_cast<int>(i) < per_worker; ++i) {
      speeds.trials.push_back({finished[i]->config(), finished[i]->result().tokens_per_s()});
    }
  }
  return out;
}

void MemoryStore::AdvanceBoundaryLine(const v1::Trial& finished, absl::Time now) {
  v1::Sweep& sweep = sweeps_.at(finished.sweep_id()).sweep;
  const BoundarySettings settings = BoundarySettingsOf(sweep.spec().boundary_search());
  std::vector<Probe> probes;
  for (const auto& [id, st] : trials_) {
    const v1::Trial& t = st.trial;
    if (t.sweep_id() != finished.sweep_id() || !t.has_boundary_line() || t.boundary_line() != finished.boundary_line()) {
      continue;
    }
    const v1::TrialResult& r = t.result();
    auto step0 = metrics_.find({id, 0});
    const std::optional<double> l0 =
        TrialL0(r.has_init_val_loss() ? std::optional(r.init_val_loss()) : std::nullopt,
                step0 != metrics_.end() && step0->second.has_val_loss() ? std::optional(step0->second.val_loss())
                                                                        : std::nullopt);
    probes.push_back({t.config().lr(),
                      ClassifyProbe(t.state(), r.has_final_val_loss() ? std::optional(r.final_val_loss()) : std::nullopt,
                                    l0, r.has_unigram_loss() ? std::optional(r.unigram_loss()) : std::nullopt,
                                    r.has_val_loss_progress() ? std::optional(r.val_loss_progress()) : std::nullopt,
                                    settings)});
  }
  const LineDecision decision = DecideLine(settings, probes);
  if (!decision.next_lr.has_value() || sweep.state() != v1::SWEEP_RUNNING) return;
  StoredTrial st;
  v1::Trial& t = st.trial;
  t.set_id(next_trial_id_++);
  t.set_sweep_id(sweep.id());
  t.set_index(sweep.trial_count());
  *t.mutable_config() = finished.config();
  t.mutable_config()->set_lr(*decision.next_lr);
  t.set_variant(finished.variant());
  t.set_state(v1::TRIAL_PENDING);
  t.set_boundary_line(finished.boundary_line());
  *t.mutable_created_at() = ToProto(now);
  Touch(st);
  trials_[t.id()] = std::move(st);
  sweep.set_trial_count(sweep.trial_count() + 1);
}

}  // namespace normsweep::db

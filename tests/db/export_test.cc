// ExportSweep on both stores (db/export.h): columns and rows against
// GetTrial / GetTrialHistory, the chunk bound, the cursor under a concurrent
// writer, bad names. PostgreSQL runs on a throwaway database per test.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "db/pg_connection.h"
#include "db/store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/store_kinds.h"
#include "tests/common/test_time.h"

namespace normsweep::db {
namespace {

using ::testing::HasSubstr;
using testing::kT0;
const absl::Duration kLease = absl::Hours(1);

// The chunks of one export, and the rows they carry as (trial, step, layer)
// -> column -> value text.
struct Exported {
  std::vector<v1::ExportChunk> chunks;
  absl::Status status;
  std::string cursor() const { return chunks.empty() ? "" : chunks.back().cursor(); }
  int rows() const {
    int n = 0;
    for (const auto& c : chunks) n += c.rows();
    return n;
  }
};

// A column's value in a row as text, "" when absent; doubles exactly (%a).
std::string Cell(const v1::ExportColumn& c, int row) {
  if (c.absent_size() > 0 && c.absent(row)) return "";
  switch (c.type()) {
    case v1::EXPORT_COLUMN_DOUBLE:
    case v1::EXPORT_COLUMN_FLOAT: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%a", c.doubles(row));
      return buf;
    }
    case v1::EXPORT_COLUMN_STRING: return c.strings(row);
    default: return std::to_string(c.ints(row));
  }
}
std::string Hex(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

class ExportTest : public testing::BothStoresTest {
 protected:
  Exported Export(int64_t sweep, const std::string& table, const std::string& since = "",
                  std::vector<std::string> metrics = {}, ExportOptions options = {}) {
    v1::ExportSweepRequest req;
    req.set_sweep_id(sweep);
    req.set_table(table);
    req.set_since(since);
    for (auto& m : metrics) req.add_metrics(m);
    Exported out;
    absl::StatusOr<ExportPlan> plan = PlanExport(req);
    if (!plan.ok()) {
      out.status = plan.status();
      return out;
    }
    ExportCallbacks cb{[&](const v1::ExportChunk& c) {
                         out.chunks.push_back(c);
                         return true;
                       },
                       [] { return false; }};
    out.status = store_->ExportSweep(*plan, options, cb);
    return out;
  }

  // Rows as (trial_id, step, layer) -> {column -> cell}.
  static std::map<std::tuple<int64_t, int64_t, int64_t>, std::map<std::string, std::string>> Rows(
      const Exported& e) {
    std::map<std::tuple<int64_t, int64_t, int64_t>, std::map<std::string, std::string>> out;
    for (const v1::ExportChunk& c : e.chunks) {
      for (int r = 0; r < c.rows(); ++r) {
        std::map<std::string, std::string> row;
        for (const auto& col : c.columns()) row[col.name()] = Cell(col, r);
        int64_t step = row.contains("step") ? std::stoll(row["step"]) : row.contains("attempt") ? std::stoll(row["attempt"]) : 0;
        int64_t layer = row.contains("layer") ? std::stoll(row["layer"]) : 0;
        out[{std::stoll(row["trial_id"]), step, layer}] = row;
      }
    }
    return out;
  }

  // grad_norms' rows as (trial_id, step, layer, matrix) -> norm, each key once.
  static std::map<std::tuple<int64_t, int64_t, int64_t, std::string>, std::string> GradRows(const Exported& e) {
    std::map<std::tuple<int64_t, int64_t, int64_t, std::string>, std::string> out;
    for (const v1::ExportChunk& c : e.chunks) {
      for (int r = 0; r < c.rows(); ++r) {
        const auto key = std::make_tuple(c.columns(0).ints(r), c.columns(1).ints(r), c.columns(2).ints(r),
                                         c.columns(3).strings(r));
        EXPECT_FALSE(out.contains(key)) << "sent twice: layer " << std::get<2>(key) << " " << std::get<3>(key);
        out[key] = Cell(c.columns(4), r);
      }
    }
    return out;
  }

  int64_t Worker() {
    v1::RegisterWorkerRequest req;
    req.set_name("w");
    req.set_hostname("h");
    return *store_->RegisterWorker(req, kT0);
  }

  v1::Sweep Create(int trials) {
    v1::SweepSpec spec;
    spec.set_name("export");
    spec.set_max_attempts(3);
    std::vector<NewTrial> ts;
    for (int i = 0; i < trials; ++i) {
      NewTrial t;
      t.index = i;
      t.config.set_placement(i % 2 ? "pre" : "post");
      t.config.set_lr(1e-3 / 3 * (i + 1));  // not exact in decimal
      t.config.set_seed(i);
      t.config.set_d_model(64);
      t.variant = i % 2 ? "layers=12" : "";
      ts.push_back(t);
    }
    return store_->CreateSweep("", spec, ts, kT0)->sweep;
  }

  // Steps [from, to) of a leased trial, with a val_loss every 10 and grad
  // norms and diagnostics at step 0.
  void Report(const v1::Trial& t, int64_t worker, int from, int to) {
    v1::ReportProgressRequest req;
    req.set_trial_id(t.id());
    req.set_worker_id(worker);
    req.set_attempt(t.attempts());
    for (int s = from; s < to; ++s) {
      v1::MetricPoint* p = req.add_points();
      p->set_step(s);
      p->set_lr(0.1 / 3 * s);
      p->set_train_loss(std::sqrt(2.0) + s / 7.0);
      if (s % 10 == 0) p->set_val_loss(std::exp(1.0) / (s + 1));
      if (s == 0) {
        v1::LayerGradNorms* g = req.add_layer_grad_norms();
        for (int layer = 0; layer < 2; ++layer) {
          for (const char* m : {"ffn.fc1", "ffn.fc2"}) {
            v1::LayerGradNorm* n = g->add_norms();
            n->set_layer(layer);
            n->set_matrix(m);
            n->set_norm(1.0 / 3 + layer + (m[5] == '2'));
          }
        }
        v1::StepDiagnostics* d = req.add_diagnostics();
        for (int layer = 0; layer < 2; ++layer) {
          v1::LayerDiagnostics* l = d->add_layers();
          l->set_layer(layer);
          l->set_max_attn_logit(0.1 * layer + 1.0 / 7);
        }
      }
    }
    ASSERT_TRUE(store_->ReportProgress(req, kT0).ok());
  }

  std::vector<v1::Trial> LeaseAll(int64_t worker, int n) {
    std::vector<v1::Trial> out;
    for (int i = 0; i < n; ++i) out.push_back(**store_->LeaseTrial(worker, kT0, kLease));
    return out;
  }
};

TEST_P(ExportTest, TablesEqualGetTrialAndHistory) {
  v1::Sweep s = Create(3);
  int64_t w = Worker();
  std::vector<v1::Trial> trials = LeaseAll(w, 3);
  for (const auto& t : trials) Report(t, w, 0, 25);
  // Late rows (trial_metric_late): an evaluation of steps already stored in
  // a batch, and steps that arrive after later ones.
  v1::ReportProgressRequest late;
  late.set_trial_id(trials[1].id());
  late.set_worker_id(w);
  late.set_attempt(trials[1].attempts());
  for (int step : {5, 6, 7}) {
    v1::MetricPoint* p = late.add_points();
    p->set_step(step);
    p->set_val_accuracy(0.5 + step / 100.0);
  }
  ASSERT_TRUE(store_->ReportProgress(late, kT0).ok());
  Report(trials[2], w, 30, 35);
  Report(trials[2], w, 27, 28);
  v1::FinishTrialRequest fin;
  fin.set_trial_id(trials[0].id());
  fin.set_worker_id(w);
  fin.set_attempt(1);
  fin.set_outcome(v1::TRIAL_SUCCEEDED);
  fin.mutable_result()->set_final_val_loss(1.0 / 3);
  ASSERT_TRUE(store_->FinishTrial(fin, kT0 + absl::Seconds(1), nullptr).ok());
  // An expired lease: an attempt.
  ASSERT_TRUE(store_->ExpireLeases(kT0 + kLease + absl::Seconds(1)).ok());

  Exported tr = Export(s.id(), "trials");
  ASSERT_TRUE(tr.status.ok()) << tr.status;
  ASSERT_EQ(tr.chunks.size(), 1u);
  EXPECT_TRUE(tr.chunks[0].last());
  auto rows = Rows(tr);
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& t0 : trials) {
    v1::Trial t = *store_->GetTrial(t0.id());
    auto& row = rows[{t.id(), 0, 0}];
    EXPECT_EQ(row["trial_index"], std::to_string(t.index()));
    EXPECT_EQ(row["state"], v1::TrialState_Name(t.state()));
    EXPECT_EQ(row["variant"], t.variant());
    EXPECT_EQ(row["attempts"], std::to_string(t.attempts()));
    EXPECT_EQ(row["peak_lr"], Hex(t.config().lr()));
    EXPECT_EQ(row["lr"], Hex(t.config().lr()));  // deprecated: peak_lr
    EXPECT_EQ(row["placement"], t.config().placement());
    EXPECT_EQ(row["d_model"], "64");
    EXPECT_EQ(row["final_val_loss"], t.result().has_final_val_loss() ? Hex(t.result().final_val_loss()) : "");
    EXPECT_EQ(row["started_at"], std::to_string(absl::ToUnixMicros(kT0)));
  }

  Exported m = Export(s.id(), "metrics");
  ASSERT_TRUE(m.status.ok()) << m.status;
  auto mrows = Rows(m);
  size_t expected = 0;
  for (const auto& t : trials) {
    TrialHistory h = *store_->GetTrialHistory(t.id());
    expected += h.metrics.size();
    for (const v1::MetricPoint& p : h.metrics) {
      auto& row = mrows[{t.id(), p.step(), 0}];
      EXPECT_EQ(row["lr"], Hex(p.lr()));
      EXPECT_EQ(row["train_loss"], Hex(p.train_loss()));
      EXPECT_EQ(row["val_loss"], p.has_val_loss() ? Hex(p.val_loss()) : "");
      EXPECT_EQ(row["val_accuracy"], p.has_val_accuracy() ? Hex(p.val_accuracy()) : "");
      EXPECT_EQ(row["z_term"], p.has_z_term() ? Hex(p.z_term()) : "");
      EXPECT_EQ(row["tokens_per_s"], p.has_tokens_per_s() ? Hex(p.tokens_per_s()) : "");
    }
    const auto grows = GradRows(Export(s.id(), "grad_norms"));
    for (const auto& g : h.layer_grad_norms) {
      for (const auto& n : g.norms()) {
        const auto key = std::make_tuple(t.id(), int64_t{g.step()}, int64_t{n.layer()}, n.matrix());
        ASSERT_TRUE(grows.contains(key)) << "trial " << t.id() << " layer " << n.layer() << " " << n.matrix();
        EXPECT_EQ(grows.at(key), Hex(n.norm()));
      }
    }
    auto drows = Rows(Export(s.id(), "diagnostics"));
    for (const auto& d : h.diagnostics) {
      for (const auto& l : d.layers()) {
        const std::tuple<int64_t, int64_t, int64_t> key{t.id(), d.step(), l.layer()};
        EXPECT_EQ(drows[key]["max_attn_logit"], Hex(l.max_attn_logit()));
      }
    }
  }
  EXPECT_EQ(mrows.size(), expected);
  size_t sent = 0;  // each (trial, step) once
  for (const v1::ExportChunk& c : m.chunks) sent += c.rows();
  EXPECT_EQ(sent, expected);
  EXPECT_EQ(GradRows(Export(s.id(), "grad_norms")).size(), 12u);  // 3 trials x 2 layers x 2 matrices
  EXPECT_EQ(Rows(Export(s.id(), "diagnostics")).size(), 6u);

  // Attempts as GetTrial lists them: the recorded ones (the two expired
  // leases), then the attempt that finished trial 0 (db::FinishingAttempt).
  auto arows = Rows(Export(s.id(), "attempts"));
  size_t attempts = 0;
  for (const auto& t : trials) {
    const TrialHistory h = *store_->GetTrialHistory(t.id());
    std::vector<v1::TrialAttempt> listed = h.attempts;
    if (auto last = FinishingAttempt(*store_->GetTrial(t.id()), listed.empty() ? 0 : listed.back().attempt())) {
      listed.push_back(*last);
    }
    for (const auto& a : listed) {
      ++attempts;
      ASSERT_EQ(arows.count({t.id(), a.attempt(), 0}), 1u) << "trial " << t.id() << " attempt " << a.attempt();
      auto& row = arows[{t.id(), a.attempt(), 0}];
      EXPECT_EQ(row["outcome"], v1::TrialState_Name(a.outcome()));
      EXPECT_EQ(row["interruption"], a.interruption());
      EXPECT_EQ(row["worker_id"], std::to_string(a.worker_id()));
      EXPECT_EQ(row["ended_at"], std::to_string(a.ended_at().seconds() * 1000000 + a.ended_at().nanos() / 1000));
    }
  }
  EXPECT_EQ(attempts, 3u);  // two expired leases and trial 0's finish
  EXPECT_EQ(arows.size(), attempts);
  auto& finished = arows[std::make_tuple(trials[0].id(), int64_t{1}, int64_t{0})];
  EXPECT_EQ(finished["outcome"], "TRIAL_SUCCEEDED");
  EXPECT_EQ(finished["ended_at"], std::to_string(absl::ToUnixMicros(kT0 + absl::Seconds(1))));

  // Narrowed metric columns.
  Exported narrow = Export(s.id(), "metrics", "", {"val_loss", "lr"});
  ASSERT_TRUE(narrow.status.ok());
  ASSERT_EQ(narrow.chunks[0].columns_size(), 4);
  EXPECT_EQ(narrow.chunks[0].columns(2).name(), "val_loss");
  EXPECT_EQ(narrow.chunks[0].columns(3).name(), "lr");
}

TEST(ExportColumnsTest, TrialsNamePeakLrAndKeepLrLastGradNormsAreLong) {
  std::vector<std::string> names;
  for (const ExportColumnSpec& c : ExportColumns(ExportTable::kTrials)) names.push_back(c.name);
  // TrainConfig.lr's column is peak_lr, in lr's place among the config's fields.
  const int lr_index = v1::TrainConfig::descriptor()->FindFieldByName("lr")->index();
  const std::vector<std::string> first = {"trial_id", "trial_index", "variant", "state", "attempts", "interruptions",
                                          "worker_id", "created_at", "started_at", "finished_at"};
  ASSERT_GT(names.size(), first.size() + lr_index + 1);
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + first.size()), first);
  EXPECT_EQ(names[first.size() + v1::TrainConfig::descriptor()->FindFieldByName("placement")->index()], "placement");
  EXPECT_EQ(names[first.size() + lr_index], "peak_lr");
  // lr, deprecated, once, after every other column (the results' included).
  EXPECT_EQ(names.back(), "lr");
  EXPECT_EQ(std::count(names.begin(), names.end(), "lr"), 1);
  EXPECT_EQ(names[names.size() - 2], v1::TrialResult::descriptor()->field(
                                         v1::TrialResult::descriptor()->field_count() - 1)->name());

  std::vector<std::pair<std::string, v1::ExportColumnType>> grad;
  for (const ExportColumnSpec& c : ExportColumns(ExportTable::kGradNorms)) grad.emplace_back(c.name, c.type);
  const std::vector<std::pair<std::string, v1::ExportColumnType>> expected = {
      {"trial_id", v1::EXPORT_COLUMN_INT64}, {"step", v1::EXPORT_COLUMN_INT64}, {"layer", v1::EXPORT_COLUMN_INT64},
      {"matrix", v1::EXPORT_COLUMN_STRING}, {"norm", v1::EXPORT_COLUMN_DOUBLE}};
  EXPECT_EQ(grad, expected);
}

TEST(ExportCursorTest, AMatrixEndsTheCursorOfGradNormsOnly) {
  ExportKey key{7, 3, 0, 1, "ffn.fc2"};
  const std::string cursor = EncodeExportCursor(5, "grad_norms", key);
  EXPECT_EQ(cursor, "5.grad_norms.7.3.0.1.ffn.fc2");
  v1::ExportSweepRequest req;
  req.set_sweep_id(5);
  req.set_table("grad_norms");
  req.set_since(cursor);
  absl::StatusOr<ExportPlan> plan = PlanExport(req);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->since, key);
  req.set_since("5.grad_norms.7.3.0.1");  // a layer's cursor: before its matrices
  ASSERT_TRUE(PlanExport(req).ok());
  EXPECT_EQ(PlanExport(req)->since.matrix, "");
  EXPECT_EQ(EncodeExportCursor(5, "metrics", ExportKey{7, 3, 4, 0}), "5.metrics.7.3.4.0");
  req.set_table("metrics");
  req.set_since("5.metrics.7.3.4.0.ffn.fc1");
  absl::StatusOr<ExportPlan> other = PlanExport(req);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(other.status().message(), HasSubstr("a matrix in a cursor of metrics"));
  req.set_table("grad_norms");
  req.set_since("5.grad_norms.7.3.0.1.");
  EXPECT_THAT(PlanExport(req).status().message(), HasSubstr("since: not a cursor of ExportSweep"));
}

// Every chunk a row: each chunk's cursor, taken between two matrices of one
// layer (written by one transaction: the same x), continues with the next.
TEST_P(ExportTest, GradNormsCursorContinuesBetweenTheMatricesOfALayer) {
  v1::Sweep s = Create(2);
  int64_t w = Worker();
  std::vector<v1::Trial> trials = LeaseAll(w, 2);
  for (const auto& t : trials) Report(t, w, 0, 1);
  ExportOptions one_row;
  one_row.max_chunk_bytes = 1;  // a chunk holds one row
  Exported all = Export(s.id(), "grad_norms", "", {}, one_row);
  ASSERT_TRUE(all.status.ok()) << all.status;
  const auto rows = GradRows(all);
  ASSERT_EQ(rows.size(), 8u);  // 2 trials x 2 layers x 2 matrices
  ASSERT_EQ(all.rows(), 8);
  // In key order: within a layer, ffn.fc1 before ffn.fc2.
  std::vector<std::string> matrices;
  for (const auto& c : all.chunks) {
    if (c.rows() > 0) matrices.push_back(c.columns(3).strings(0));
  }
  EXPECT_EQ(matrices, (std::vector<std::string>{"ffn.fc1", "ffn.fc2", "ffn.fc1", "ffn.fc2", "ffn.fc1", "ffn.fc2",
                                                "ffn.fc1", "ffn.fc2"}));
  int before = 0;
  for (const auto& c : all.chunks) {
    before += c.rows();
    Exported rest = Export(s.id(), "grad_norms", c.cursor());
    ASSERT_TRUE(rest.status.ok()) << rest.status << " after " << c.cursor();
    EXPECT_EQ(before + rest.rows(), 8) << "after " << c.cursor();
  }
  EXPECT_EQ(Export(s.id(), "grad_norms", all.cursor()).rows(), 0);
}

TEST_P(ExportTest, ChunksStayUnderTheBound) {
  v1::Sweep s = Create(4);
  int64_t w = Worker();
  for (const auto& t : LeaseAll(w, 4)) Report(t, w, 0, 3000);
  ExportOptions small;
  small.max_chunk_bytes = 100 * 1000;
  small.fetch_rows = 700;
  Exported m = Export(s.id(), "metrics", "", {}, small);
  ASSERT_TRUE(m.status.ok()) << m.status;
  EXPECT_EQ(m.rows(), 12000);
  EXPECT_GE(m.chunks.size(), 5u);
  for (const auto& c : m.chunks) EXPECT_LE(c.ByteSizeLong(), small.max_chunk_bytes);
  EXPECT_TRUE(m.chunks.back().last());
  // The default bound: about 1 MB.
  Exported big = Export(s.id(), "metrics");
  for (const auto& c : big.chunks) EXPECT_LE(c.ByteSizeLong(), 1000u * 1000u);
  EXPECT_EQ(big.rows(), 12000);
}

TEST_P(ExportTest, SinceCursorGivesExactlyTheNewRows) {
  v1::Sweep s = Create(2);
  int64_t w = Worker();
  std::vector<v1::Trial> trials = LeaseAll(w, 2);
  Report(trials[0], w, 0, 10);
  Exported first = Export(s.id(), "metrics");
  ASSERT_EQ(first.rows(), 10);
  Report(trials[0], w, 10, 15);
  Report(trials[1], w, 0, 3);
  Exported next = Export(s.id(), "metrics", first.cursor());
  ASSERT_TRUE(next.status.ok()) << next.status;
  auto rows = Rows(next);
  ASSERT_EQ(rows.size(), 8u);
  EXPECT_TRUE(rows.contains({trials[0].id(), 10, 0}));
  EXPECT_TRUE(rows.contains({trials[1].id(), 2, 0}));
  EXPECT_EQ(Export(s.id(), "metrics", next.cursor()).rows(), 0);
  // A mid-stream chunk's cursor continues after that chunk.
  ExportOptions small;
  small.max_chunk_bytes = 600;
  Exported chunked = Export(s.id(), "metrics", "", {}, small);
  ASSERT_GT(chunked.chunks.size(), 3u);
  EXPECT_EQ(Export(s.id(), "metrics", chunked.chunks[1].cursor()).rows() + chunked.chunks[0].rows() +
                chunked.chunks[1].rows(),
            18);
}

TEST_P(ExportTest, FollowWithAConcurrentWriterNoRowTwiceNoneMissing) {
  v1::Sweep s = Create(3);
  int64_t w = Worker();
  std::vector<v1::Trial> trials = LeaseAll(w, 3);
  std::thread writer([&] {
    for (int batch = 0; batch < 20; ++batch) {
      for (const auto& t : trials) Report(t, w, batch * 5, batch * 5 + 5);
    }
    for (const auto& t : trials) {
      v1::FinishTrialRequest fin;
      fin.set_trial_id(t.id());
      fin.set_worker_id(w);
      fin.set_attempt(t.attempts());
      fin.set_outcome(v1::TRIAL_SUCCEEDED);
      ASSERT_TRUE(store_->FinishTrial(fin, kT0, nullptr).ok());
    }
  });
  v1::ExportSweepRequest req;
  req.set_sweep_id(s.id());
  req.set_table("metrics");
  req.set_follow(true);
  ExportPlan plan = *PlanExport(req);
  std::map<std::pair<int64_t, int64_t>, int> seen;
  bool last = false;
  ExportOptions fast;
  fast.follow_poll = absl::Milliseconds(5);
  fast.max_chunk_bytes = 2000;
  ExportCallbacks cb{[&](const v1::ExportChunk& c) {
                       for (int r = 0; r < c.rows(); ++r) ++seen[{c.columns(0).ints(r), c.columns(1).ints(r)}];
                       last = c.last();
                       return true;
                     },
                     [] { return false; }};
  absl::Status st = store_->ExportSweep(plan, fast, cb);
  writer.join();
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_TRUE(last);
  EXPECT_EQ(seen.size(), 300u);
  for (const auto& [k, n] : seen) EXPECT_EQ(n, 1) << k.first << " step " << k.second;
}

TEST_P(ExportTest, BadNamesAreRefusedNamingTheField) {
  v1::Sweep s = Create(1);
  Exported t = Export(s.id(), "metricz");
  EXPECT_EQ(t.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status.message(), HasSubstr("table: unknown table 'metricz'; valid: trials, metrics"));
  Exported m = Export(s.id(), "metrics", "", {"lr", "val_loss", "foo"});
  EXPECT_EQ(m.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status.message(), HasSubstr("metrics[2]: unknown metric 'foo'; valid: lr, train_loss"));
  Exported c = Export(s.id(), "metrics", "garbage");
  EXPECT_EQ(c.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status.message(), HasSubstr("since: "));
  Exported other = Export(s.id(), "trials", Export(s.id(), "metrics").cursor());
  EXPECT_THAT(other.status.message(), HasSubstr("since: a cursor of table metrics"));
  Exported none = Export(s.id() + 100, "trials");
  EXPECT_EQ(none.status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(none.status.message(), HasSubstr(absl::StrCat("sweep_id ", s.id() + 100)));
}

TEST_P(ExportTest, AClientThatGoesAwayEndsTheExport) {
  v1::Sweep s = Create(2);
  int64_t w = Worker();
  for (const auto& t : LeaseAll(w, 2)) Report(t, w, 0, 2000);
  v1::ExportSweepRequest req;
  req.set_sweep_id(s.id());
  req.set_table("metrics");
  req.set_follow(true);  // would wait for the sweep to end
  ExportPlan plan = *PlanExport(req);
  std::atomic<int> chunks{0};
  ExportOptions small;
  small.max_chunk_bytes = 5000;
  ExportCallbacks cb{[&](const v1::ExportChunk&) { return ++chunks < 3; }, [&] { return chunks >= 3; }};
  absl::Status st = store_->ExportSweep(plan, small, cb);
  EXPECT_EQ(st.code(), absl::StatusCode::kCancelled) << st;
  EXPECT_EQ(chunks, 3);
  if (GetParam() == testing::StoreKind::kPostgres) {
    // No session of the export is left: not idle in a transaction, not
    // holding its cursor (the backend may take a moment to exit).
    PgConnectOptions o;
    o.conninfo = conninfo_;
    std::unique_ptr<PgConnection> conn = *PgConnection::Connect(o);
    int64_t left = -1;
    for (int i = 0; i < 100 && left != 0; ++i) {
      if (i > 0) absl::SleepFor(absl::Milliseconds(50));
      left = conn->Exec("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                        " AND pid <> pg_backend_pid() AND (state LIKE 'idle in transaction%'"
                        " OR query LIKE '%ns_export%')")
                 ->GetInt64(0, 0);
    }
    EXPECT_EQ(left, 0);
  }
  // Nothing left behind: the next exports work, more of them than may run at once.
  for (int i = 0; i < 6; ++i) EXPECT_EQ(Export(s.id(), "metrics").rows(), 4000);
}

INSTANTIATE_TEST_SUITE_P(Stores, ExportTest, testing::BothStores(), testing::StoreKindName);

}  // namespace
}  // namespace normsweep::db

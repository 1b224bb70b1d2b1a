#include "tests/common/views_test.h"

#include "tests/common/fresh_database.h"

namespace normsweep::testing {

void ViewsTest::SetUp() {
  auto conninfo = FreshDatabase();
  ASSERT_TRUE(conninfo.ok()) << conninfo.status();
  conninfo_ = *conninfo;
  auto store = OpenStore(conninfo_);  // applies the migrations
  ASSERT_TRUE(store.ok()) << store.status();
  store_ = *std::move(store);
  auto conn = Connect(conninfo_);
  ASSERT_TRUE(conn.ok()) << conn.status();
  conn_ = *std::move(conn);
}

int64_t ViewsTest::AddSweep(const std::string& name, const std::string& spec) {
  auto r = conn_->Exec(
      "INSERT INTO sweeps (name, spec, state, max_attempts, trial_count, created_at)"
      " VALUES ($1, $2::jsonb, 'COMPLETED', 1, 0, now()) RETURNING id",
      db::PgParams().Add(name).Add(spec));
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->GetInt64(0, 0) : 0;
}

int64_t ViewsTest::AddTrial(int64_t sweep, const TrialRow& row) {
  auto r = conn_->Exec(
      "INSERT INTO trials (sweep_id, trial_index, placement, warmup_steps, peak_lr, seed, variant, config,"
      " priority, state, final_val_loss, init_val_loss, unigram_loss, val_loss_progress, created_at)"
      " VALUES ($1, (SELECT count(*) FROM trials WHERE sweep_id = $1), $2, $3, $4, $5, $6, $7::jsonb, 0, $8, $9,"
      " $10, $11, $12, now()) RETURNING id",
      db::PgParams().Add(sweep).Add(row.placement).Add(static_cast<int32_t>(row.warmup_steps)).Add(row.peak_lr)
          .Add(static_cast<int32_t>(row.seed)).Add(row.variant).Add(row.config).Add(row.state)
          .AddOptional(row.final_val_loss).AddOptional(row.init_val_loss).AddOptional(row.unigram_loss)
          .AddOptional(row.val_loss_progress));
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->GetInt64(0, 0) : 0;
}

std::map<int64_t, std::string> ViewsTest::Failures(int64_t sweep) {
  std::map<int64_t, std::string> out;
  auto r = conn_->Exec("SELECT trial_id, coalesce(failure, 'NULL') FROM trial_loss_values WHERE sweep_id = $1",
                       db::PgParams().Add(sweep));
  EXPECT_TRUE(r.ok()) << r.status();
  for (int i = 0; r.ok() && i < r->rows(); ++i) out[r->GetInt64(i, 0)] = r->GetString(i, 1);
  return out;
}

v1::GetSweepAnalysisResponse ViewsTest::Analysis(int64_t sweep, double tolerance) {
  auto a = store_->GetSweepAnalysis(sweep, tolerance);
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? *a : v1::GetSweepAnalysisResponse();
}

}  // namespace normsweep::testing

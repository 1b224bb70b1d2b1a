// PostgreSQL-only behaviour: migrations (recorded, concurrent start-ups),
// the analysis views, statement splitting, timeouts (the server's and the
// client's), connection loss. Includes the db-internal db/pg_connection.h to
// look at rows and connections directly.
#include <signal.h>

#include <cmath>
#include <limits>
#include <thread>

#include "absl/strings/str_cat.h"
#include "db/migrations.h"
#include "db/pg_connection.h"
#include "db/postgres_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/fresh_database.h"
#include "tests/common/postgres_instance.h"
#include "tests/common/requests.h"
#include "tests/common/test_time.h"

namespace normsweep::db {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using testing::kT0;

// The helpers below fail the test and return an empty value ("" or null)
// when they cannot do their part; every caller checks the pointer fatally.
std::string NewDatabase(const std::string& prefix) {
  auto conninfo = testing::FreshDatabase(prefix);
  EXPECT_TRUE(conninfo.ok()) << conninfo.status();
  return conninfo.ok() ? *conninfo : "";
}

std::unique_ptr<PgConnection> Connect(const std::string& conninfo) {
  auto conn = testing::Connect(conninfo);
  EXPECT_TRUE(conn.ok()) << conn.status();
  return conn.ok() ? *std::move(conn) : nullptr;
}

std::unique_ptr<Store> OpenStore(const std::string& conninfo) {
  auto store = testing::OpenStore(conninfo);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

// A sweep of n Pre-LN trials (lr 1e-3), created at kT0. max_interruptions
// 0: the default (20).
absl::StatusOr<CreateSweepResult> CreateSweepOf(Store& store, const std::string& name, int n,
                                                int max_attempts, int max_interruptions = 0) {
  v1::SweepSpec spec;
  spec.set_name(name);
  spec.set_max_attempts(max_attempts);
  spec.set_max_interruptions(max_interruptions);
  std::vector<NewTrial> trials(n);
  for (int i = 0; i < n; ++i) {
    trials[i].index = i;
    trials[i].config.set_placement("pre");
    trials[i].config.set_lr(1e-3);
  }
  return store.CreateSweep("", spec, trials, kT0);
}

// Registers worker "w"; 0 after failing the test.
int64_t RegisterWorker(Store& store) {
  v1::RegisterWorkerRequest reg;
  reg.set_name("w");
  auto w = store.RegisterWorker(reg, kT0);
  EXPECT_TRUE(w.ok()) << w.status();
  return w.ok() ? *w : 0;
}

// n trials leased by worker w for `term`; fewer after failing the test.
std::vector<v1::Trial> LeaseTrials(Store& store, int64_t w, int n, absl::Duration term) {
  std::vector<v1::Trial> leased;
  for (int i = 0; i < n; ++i) {
    auto t = store.LeaseTrial(w, kT0, term);
    EXPECT_TRUE(t.ok() && t->has_value()) << t.status();
    if (!t.ok() || !t->has_value()) break;
    leased.push_back(**t);
  }
  return leased;
}

// A store on a new database holding a sweep of n trials (CreateSweepOf),
// all leased by worker "w" for `term`. Fails fatally: call it through
// ASSERT_NO_FATAL_FAILURE.
struct LeasedStore {
  std::string conninfo;
  std::unique_ptr<Store> store;
  int64_t worker = 0;
  std::vector<v1::Trial> trials;
};
void OpenLeasedStore(const std::string& name, int n, absl::Duration term, LeasedStore* s) {
  s->conninfo = NewDatabase(name);
  s->store = OpenStore(s->conninfo);
  ASSERT_NE(s->store, nullptr);
  ASSERT_TRUE(CreateSweepOf(*s->store, name, n, 1).ok());
  s->worker = RegisterWorker(*s->store);
  s->trials = LeaseTrials(*s->store, s->worker, n, term);
  ASSERT_EQ(s->trials.size(), static_cast<size_t>(n));
}

TEST(SplitSqlStatementsTest, SplitsOutsideQuotesAndComments) {
  EXPECT_THAT(SplitSqlStatements("SELECT 1; SELECT 'a;b';\n-- c; d\nSELECT $$x;y$$;\n-- end\n"),
              ElementsAre("SELECT 1", " SELECT 'a;b'", "\n-- c; d\nSELECT $$x;y$$"));
  EXPECT_THAT(SplitSqlStatements("CREATE FUNCTION f() RETURNS int AS $body$ SELECT 1; $body$ LANGUAGE sql"),
              ElementsAre("CREATE FUNCTION f() RETURNS int AS $body$ SELECT 1; $body$ LANGUAGE sql"));
  EXPECT_THAT(SplitSqlStatements("SELECT $1;"), ElementsAre("SELECT $1"));
}

TEST(MigrationsTest, AppliedOnceInOrderAndRecorded) {
  const std::string conninfo = NewDatabase("migrations");
  PgConnectOptions options;
  options.conninfo = conninfo;
  options.statement_timeout = absl::Milliseconds(1500);
  auto connected = PgConnection::Connect(options);
  ASSERT_TRUE(connected.ok());
  std::unique_ptr<PgConnection> conn = *std::move(connected);
  // A slow migration is not cut off by the statement timeout...
  std::vector<Migration> slow = {{1, "0001_slow", "SELECT pg_sleep(2); CREATE TABLE slow_done (x int);"}};
  ASSERT_TRUE(ApplyMigrations(*conn, slow, {}).ok());
  // ...which applies again afterwards.
  EXPECT_EQ(conn->Exec("SELECT pg_sleep(2)").status().code(), absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(conn->Exec("DROP TABLE slow_done").ok());
  ASSERT_TRUE(conn->Exec("DELETE FROM schema_migrations").ok());
  auto first = ApplyMigrations(*conn, EmbeddedMigrations(), EmbeddedViews());
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, static_cast<int>(EmbeddedMigrations().size()));
  auto second = ApplyMigrations(*conn, EmbeddedMigrations(), EmbeddedViews());
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*second, 0);
  auto rows = conn->Exec("SELECT version, name FROM schema_migrations ORDER BY version");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->rows(), static_cast<int>(EmbeddedMigrations().size()));
  EXPECT_EQ(rows->GetInt64(0, 0), 1);
  EXPECT_EQ(rows->GetString(0, 1), "0001_initial");
  EXPECT_EQ(rows->GetString(1, 1), "0002_analysis_views");

  // A new migration is applied on top; a failing one rolls back entirely.
  std::vector<Migration> more = EmbeddedMigrations();
  more.push_back({90, "0090_test", "CREATE TABLE extra (x int); INSERT INTO extra VALUES (1);"});
  ASSERT_EQ(*ApplyMigrations(*conn, more, EmbeddedViews()), 1);
  more.push_back({91, "0091_broken", "CREATE TABLE extra2 (x int); SELECT no_such_column FROM extra;"});
  auto broken = ApplyMigrations(*conn, more, EmbeddedViews());
  EXPECT_FALSE(broken.ok());
  EXPECT_THAT(std::string(broken.status().message()), HasSubstr("0091_broken"));
  auto extra2 = conn->Exec("SELECT to_regclass('extra2') IS NULL");
  ASSERT_TRUE(extra2.ok());
  EXPECT_TRUE(extra2->GetBool(0, 0));
}

TEST(MigrationsTest, ConcurrentStartupsApplyEachMigrationOnce) {
  const std::string conninfo = NewDatabase("concurrent_open");
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(6);
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&, i] {
      PostgresStoreOptions options;
      options.connect.conninfo = conninfo;
      results[i] = OpenPostgresStore(options).status();
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << r;
  auto conn = Connect(conninfo);
  ASSERT_NE(conn, nullptr);
  auto rows = conn->Exec("SELECT count(*) FROM schema_migrations");
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->GetInt64(0, 0), static_cast<int64_t>(EmbeddedMigrations().size()));
}

TEST(PgConnectionTest, StatementTimeoutIsDeadlineExceeded) {
  PgConnectOptions options;
  options.conninfo = NewDatabase("timeout");
  options.statement_timeout = absl::Milliseconds(100);
  auto conn = PgConnection::Connect(options);
  ASSERT_TRUE(conn.ok());
  auto slow = (*conn)->Exec("SELECT pg_sleep(5)");
  EXPECT_EQ(slow.status().code(), absl::StatusCode::kDeadlineExceeded);
  // Parameters are data, never SQL.
  auto echo = (*conn)->Exec("SELECT $1::text", PgParams().Add("'); DROP TABLE x; --"));
  ASSERT_TRUE(echo.ok());
  EXPECT_EQ(echo->GetString(0, 0), "'); DROP TABLE x; --");
  auto bad = (*conn)->Exec("SELEC 1");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("syntax error"));
}

// PgArrayOf's binary arrays read back exactly, extremes, NULLs and empty
// arrays included, as prepared-statement and one-off parameters, beside a
// text parameter; a mismatched element type is refused, not misread.
TEST(PgConnectionTest, BinaryArraysRoundTrip) {
  PgConnectOptions options;
  options.conninfo = NewDatabase("binary_arrays");
  auto conn = PgConnection::Connect(options);
  ASSERT_TRUE(conn.ok()) << conn.status();
  PgArrayOf<int32_t> ints;
  for (int32_t v : {0, -1, 2147483647, -2147483647 - 1}) ints.Add(v);
  ints.AddNull();
  PgArrayOf<int64_t> bigs;
  for (int64_t v : {int64_t{0}, int64_t{-1}, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}) {
    bigs.Add(v);
  }
  PgArrayOf<double> doubles;
  for (double v : {0.1, -0.0, 1e-310, std::numeric_limits<double>::infinity(), -1.5e300}) doubles.Add(v);
  doubles.AddOptional(false, 0);
  doubles.Add(std::numeric_limits<double>::quiet_NaN());
  PgArrayOf<std::string> texts;
  for (const char* v : {"", "a,b", "\"quoted\" \\ {braces}", "NULL", "\xce\xbb-warm-up"}) texts.Add(v);
  texts.AddNull();
  PgArrayOf<double> empty;
  const char* kSql =
      "SELECT $1::int[]::text, $2::bigint[]::text, $3::float8[]::text, $4::text[]::text, $5::float8[]::text,"
      " cardinality($5::float8[]), $6::text, ($3::float8[])[2]::text, ($4::text[])[3]";
  const PgParams params =
      PgParams().Add(ints).Add(bigs).Add(doubles).Add(texts).Add(empty).Add("plain text, sent as text");
  for (bool prepared : {false, true}) {
    absl::StatusOr<PgResult> r =
        prepared ? (*conn)->ExecPrepared("binary_arrays", kSql, params) : (*conn)->Exec(kSql, params);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->GetString(0, 0), "{0,-1,2147483647,-2147483648,NULL}");
    EXPECT_EQ(r->GetString(0, 1), "{0,-1,9223372036854775807,-9223372036854775808}");
    EXPECT_EQ(r->GetString(0, 2), "{0.1,-0,1e-310,Infinity,-1.5e+300,NULL,NaN}");
    EXPECT_EQ(r->GetString(0, 3), R"({"","a,b","\"quoted\" \\ {braces}","NULL",λ-warm-up,NULL})");
    EXPECT_EQ(r->GetString(0, 4), "{}");
    EXPECT_EQ(r->GetInt64(0, 5), 0);
    EXPECT_EQ(r->GetString(0, 6), "plain text, sent as text");
    EXPECT_EQ(r->GetString(0, 7), "-0");
    EXPECT_EQ(r->GetString(0, 8), "\"quoted\" \\ {braces}");
  }
  auto wrong = (*conn)->Exec("SELECT $1::bigint[]", PgParams().Add(ints));
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(std::string(wrong.status().message()), HasSubstr("instead of expected 20 (bigint)")) << wrong.status();
}

TEST(PgConnectionTest, DescribeNeverShowsThePassword) {
  PgConnectOptions options;
  options.conninfo = NewDatabase("describe") + " password=hunter2-secret";
  auto conn = PgConnection::Connect(options);  // trust auth ignores the password
  ASSERT_TRUE(conn.ok()) << conn.status();
  EXPECT_THAT((*conn)->Describe(), ::testing::Not(HasSubstr("hunter2")));
  EXPECT_THAT((*conn)->Describe(), HasSubstr("as postgres"));
  PgConnectOptions unreachable;
  unreachable.conninfo = "postgresql://user:hunter2-secret@127.0.0.1:1/db";
  auto failed = PgConnection::Connect(unreachable);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(failed.status().message()), ::testing::Not(HasSubstr("hunter2")));
}

// The client's own deadline, statement_timeout plus client_timeout_margin:
// a query that the server does not time out (its statement_timeout lifted
// here) is cancelled and answers DEADLINE_EXCEEDED soon after the deadline,
// and the connection is used again, for one-off and prepared statements.
TEST(PgConnectionTest, ClientTimeoutCancelsAndTheConnectionStaysUsable) {
  PgConnectOptions options;
  options.conninfo = NewDatabase("client_timeout");
  options.statement_timeout = absl::Milliseconds(200);
  options.client_timeout_margin = absl::Milliseconds(300);
  auto conn = PgConnection::Connect(options);
  ASSERT_TRUE(conn.ok()) << conn.status();
  EXPECT_EQ((*conn)->client_timeout(), absl::Milliseconds(500));
  ASSERT_TRUE((*conn)->Exec("SET statement_timeout = 0").ok());
  for (bool prepared : {false, true}) {
    const absl::Time start = absl::Now();
    absl::StatusOr<PgResult> slow = prepared ? (*conn)->ExecPrepared("sleep", "SELECT pg_sleep($1::float8)",
                                                                     PgParams().Add(30.0))
                                             : (*conn)->Exec("SELECT pg_sleep(30)");
    const absl::Duration took = absl::Now() - start;
    EXPECT_EQ(slow.status().code(), absl::StatusCode::kDeadlineExceeded) << slow.status();
    EXPECT_TRUE(IsDatabaseError(slow.status()));
    EXPECT_THAT(std::string(slow.status().message()), HasSubstr("client-side timeout"));
    EXPECT_THAT(std::string(slow.status().message()), HasSubstr("cancelled"));
    EXPECT_GE(took, absl::Milliseconds(500));
    EXPECT_LT(took, absl::Seconds(5));
    EXPECT_FALSE((*conn)->broken());
    EXPECT_TRUE((*conn)->idle());
    auto after = (*conn)->Exec("SELECT 41 + 1");
    ASSERT_TRUE(after.ok()) << after.status();
    EXPECT_EQ(after->GetInt64(0, 0), 42);
  }
  // No deadline without a statement_timeout.
  PgConnectOptions none;
  none.statement_timeout = absl::ZeroDuration();
  EXPECT_EQ(none.ClientTimeout(), absl::InfiniteDuration());
}

// A server that answers neither the query nor its cancel (its backend
// stopped): the connection is closed, so that the pool drops it, and the
// next connection is a new one.
TEST(PgConnectionTest, ClientTimeoutClosesAConnectionThatNeverAnswers) {
  PgConnectOptions options;
  options.conninfo = NewDatabase("client_timeout_stuck");
  options.statement_timeout = absl::Milliseconds(200);
  options.client_timeout_margin = absl::Milliseconds(300);
  PgPool pool(options, 1);
  int64_t first_pid = 0;
  {
    auto conn = pool.Acquire();
    ASSERT_TRUE(conn.ok()) << conn.status();
    auto pid = (**conn).Exec("SELECT pg_backend_pid()");
    ASSERT_TRUE(pid.ok()) << pid.status();
    first_pid = pid->GetInt64(0, 0);
    ASSERT_EQ(kill(static_cast<pid_t>(first_pid), SIGSTOP), 0);
    const absl::Time start = absl::Now();
    auto stuck = (**conn).Exec("SELECT 1");
    const absl::Duration took = absl::Now() - start;
    ASSERT_EQ(kill(static_cast<pid_t>(first_pid), SIGCONT), 0);
    EXPECT_EQ(stuck.status().code(), absl::StatusCode::kDeadlineExceeded) << stuck.status();
    EXPECT_TRUE(IsDatabaseError(stuck.status()));
    EXPECT_THAT(std::string(stuck.status().message()), HasSubstr("connection closed"));
    EXPECT_GE(took, absl::Milliseconds(800));  // the deadline, then the wait for the cancel
    EXPECT_LT(took, absl::Seconds(5));
    EXPECT_TRUE((**conn).broken());
    auto again = (**conn).Exec("SELECT 1");
    EXPECT_EQ(again.status().code(), absl::StatusCode::kUnavailable) << again.status();
    EXPECT_TRUE(IsDatabaseError(again.status()));
  }
  auto next = pool.Acquire();
  ASSERT_TRUE(next.ok()) << next.status();
  auto pid = (**next).Exec("SELECT pg_backend_pid()");
  ASSERT_TRUE(pid.ok()) << pid.status();
  EXPECT_NE(pid->GetInt64(0, 0), first_pid);
}

TEST(AnalysisViewsTest, PlacementSummaryAndWarmupLrGrid) {
  const std::string conninfo = NewDatabase("views");
  std::unique_ptr<Store> store = OpenStore(conninfo);
  ASSERT_NE(store, nullptr);
  // post/pre x lr {1e-3, 1e-2} x seeds {0, 1, 2}, warm-up 0.
  v1::SweepSpec spec;
  spec.set_name("views");
  spec.set_max_attempts(1);
  std::vector<NewTrial> trials;
  for (int seed = 0; seed < 3; ++seed) {
    for (double lr : {1e-3, 1e-2}) {
      for (const char* placement : {"post", "pre"}) {
        NewTrial t;
        t.index = static_cast<int>(trials.size());
        t.config.set_placement(placement);
        t.config.set_lr(lr);
        t.config.set_seed(seed);
        trials.push_back(t);
      }
    }
  }
  auto sweep = store->CreateSweep("", spec, trials, kT0);
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  int64_t w = RegisterWorker(*store);
  // Post-LN diverges at lr 1e-2; everything else converges to 2 + seed/10
  // (pre) or 2.5 + seed/10 (post).
  while (true) {
    auto t = store->LeaseTrial(w, kT0, absl::Minutes(1));
    ASSERT_TRUE(t.ok());
    if (!t->has_value()) break;
    const v1::Trial& trial = **t;
    v1::FinishTrialRequest f;
    f.set_worker_id(w);
    f.set_trial_id(trial.id());
    f.set_attempt(trial.attempts());
    const bool post = trial.config().placement() == "post";
    if (post && trial.config().lr() > 5e-3) {
      f.set_outcome(v1::TRIAL_DIVERGED);
      f.mutable_result()->set_diverged_step(10);
    } else {
      f.set_outcome(v1::TRIAL_SUCCEEDED);
      f.mutable_result()->set_final_val_loss((post ? 2.5 : 2.0) + trial.config().seed() / 10.0);
    }
    ASSERT_TRUE(store->FinishTrial(f, kT0, nullptr).ok());
  }
  auto conn = Connect(conninfo);
  ASSERT_NE(conn, nullptr);
  auto summary = conn->Exec(
      "SELECT placement, trials, succeeded, diverged, best_val_loss, median_val_loss"
      " FROM placement_sensitivity WHERE sweep_id = $1 ORDER BY placement",
      PgParams().Add(sweep->sweep.id()));
  ASSERT_TRUE(summary.ok()) << summary.status();
  ASSERT_EQ(summary->rows(), 2);
  EXPECT_EQ(summary->GetString(0, 0), "post");
  EXPECT_EQ(summary->GetInt64(0, 1), 6);
  EXPECT_EQ(summary->GetInt64(0, 2), 3);
  EXPECT_EQ(summary->GetInt64(0, 3), 3);
  EXPECT_DOUBLE_EQ(summary->GetDouble(0, 4), 2.5);
  EXPECT_DOUBLE_EQ(summary->GetDouble(0, 5), 2.6);
  EXPECT_EQ(summary->GetString(1, 0), "pre");
  EXPECT_EQ(summary->GetInt64(1, 2), 6);
  EXPECT_EQ(summary->GetInt64(1, 3), 0);
  EXPECT_DOUBLE_EQ(summary->GetDouble(1, 4), 2.0);

  auto grid = conn->Exec(
      "SELECT placement, peak_lr, trials, succeeded, diverged, mean_val_loss, std_val_loss"
      " FROM warmup_lr_grid_stats WHERE sweep_id = $1 ORDER BY placement, peak_lr",
      PgParams().Add(sweep->sweep.id()));
  ASSERT_TRUE(grid.ok()) << grid.status();
  ASSERT_EQ(grid->rows(), 4);
  // post, 1e-3: losses 2.5, 2.6, 2.7 over three seeds.
  EXPECT_EQ(grid->GetInt64(0, 2), 3);
  EXPECT_EQ(grid->GetInt64(0, 3), 3);
  EXPECT_NEAR(grid->GetDouble(0, 5), 2.6, 1e-12);
  EXPECT_NEAR(grid->GetDouble(0, 6), 0.1, 1e-12);
  // post, 1e-2: all diverged, no mean.
  EXPECT_EQ(grid->GetInt64(1, 4), 3);
  EXPECT_TRUE(grid->IsNull(1, 5));
  EXPECT_NEAR(grid->GetDouble(3, 5), 2.1, 1e-12);
}

// Its own server: the test stops and restarts it.
// Two replicas (two stores on one database) receive the same progress
// batches at once, as when a worker re-sends a batch that timed out to
// another replica: every call succeeds and every step is stored once, with
// the values of whichever arrived first (new steps are inserted plainly; the
// loser of a race fails on the unique index and runs its group again).
TEST(ProgressRaceTest, SameBatchesThroughTwoStoresStoredOnce) {
  const std::string conninfo = NewDatabase("race");
  std::unique_ptr<Store> a = OpenStore(conninfo);
  std::unique_ptr<Store> b = OpenStore(conninfo);
  ASSERT_TRUE(a != nullptr && b != nullptr);
  ASSERT_TRUE(CreateSweepOf(*a, "race", 4, 1).ok());
  const int64_t w = RegisterWorker(*a);
  const std::vector<v1::Trial> leased = LeaseTrials(*a, w, 4, absl::Minutes(10));
  ASSERT_EQ(leased.size(), 4u);
  // Connected and prepared before the race, so that neither store is done
  // before the other has started.
  for (Store* store : {a.get(), b.get()}) {
    ASSERT_TRUE(store->ReportProgress(testing::ProgressOf(w, leased[0]), kT0).ok());
  }
  constexpr int kBatches = 100;
  auto report = [&](Store* store, double loss) {
    for (int batch = 0; batch < kBatches; ++batch) {
      for (const v1::Trial& t : leased) {
        v1::ReportProgressRequest req = testing::ProgressOf(w, t);
        for (int s = 1; s <= 5; ++s) {
          v1::MetricPoint* p = req.add_points();
          p->set_step(batch * 5 + s);
          p->set_train_loss(loss);
          if (s == 5 && loss > 0) p->set_val_loss(loss);  // only store a carries evaluations
        }
        auto r = store->ReportProgress(req, kT0);
        EXPECT_TRUE(r.ok()) << r.status();
      }
    }
  };
  std::thread ta(report, a.get(), 1.0), tb(report, b.get(), -1.0);
  ta.join();
  tb.join();
  auto conn = Connect(conninfo);
  ASSERT_NE(conn, nullptr);
  auto rows = conn->Exec(
      "SELECT count(*), count(DISTINCT (trial_id, step)), count(val_loss),"
      " count(*) FILTER (WHERE train_loss NOT IN (1, -1)) FROM trial_metrics");
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->GetInt64(0, 0), 4 * kBatches * 5);
  EXPECT_EQ(rows->GetInt64(0, 1), 4 * kBatches * 5);
  EXPECT_EQ(rows->GetInt64(0, 2), 4 * kBatches);  // filled in whichever batch came second
  EXPECT_EQ(rows->GetInt64(0, 3), 0);
  // Whichever store came second wrote only what the first lacked: a step's
  // evaluation, one row each in trial_metric_late, never a training figure.
  auto late = conn->Exec("SELECT count(*), count(train_loss) FROM trial_metric_late");
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_LE(late->GetInt64(0, 0), 4 * kBatches);
  EXPECT_EQ(late->GetInt64(0, 1), 0);
  for (const v1::Trial& t : leased) {
    auto stored = a->GetTrial(t.id());
    ASSERT_TRUE(stored.ok());
    EXPECT_EQ(stored->last_step(), kBatches * 5);
  }
}

// How 0005_metric_batches.sql stores progress: a batch's new steps as one
// row of arrays, the rest (an evaluation that missed its step's batch, a
// re-sent batch) step by step with only what the batches lack.
TEST(MetricStorageTest, NewStepsBecomeOneRowAndOnlyTheRestGoesStepByStep) {
  LeasedStore s;
  ASSERT_NO_FATAL_FAILURE(OpenLeasedStore("storage", 1, absl::Minutes(1), &s));
  const std::string& conninfo = s.conninfo;
  Store* store = s.store.get();
  const int64_t w = s.worker;
  const v1::Trial t = s.trials[0];
  auto send = [&](int first, int last, int eval_step) {
    v1::ReportProgressRequest req = testing::ProgressOf(w, t);
    for (int step = first; step <= last; ++step) {
      v1::MetricPoint* p = req.add_points();
      p->set_step(step);
      if (step != eval_step) p->set_train_loss(step);
      if (step == eval_step) p->set_val_loss(100 + step);
    }
    ASSERT_TRUE(store->ReportProgress(req, kT0).ok());
  };
  send(1, 10, -1);
  send(10, 20, 10);  // step 10's evaluation, then new steps
  send(1, 10, -1);   // re-sent: nothing to add
  auto conn = Connect(conninfo);
  ASSERT_NE(conn, nullptr);
  auto batches = conn->Exec("SELECT first_step, last_step FROM trial_metric_batches ORDER BY first_step");
  ASSERT_TRUE(batches.ok()) << batches.status();
  ASSERT_EQ(batches->rows(), 2);
  EXPECT_EQ(batches->GetInt64(0, 0), 1);
  EXPECT_EQ(batches->GetInt64(0, 1), 10);
  EXPECT_EQ(batches->GetInt64(1, 0), 11);
  EXPECT_EQ(batches->GetInt64(1, 1), 20);
  auto late = conn->Exec("SELECT step, train_loss IS NULL, val_loss FROM trial_metric_late");
  ASSERT_TRUE(late.ok()) << late.status();
  ASSERT_EQ(late->rows(), 1);
  EXPECT_EQ(late->GetInt64(0, 0), 10);
  EXPECT_TRUE(late->GetBool(0, 1));
  EXPECT_DOUBLE_EQ(late->GetDouble(0, 2), 110);
  auto view = conn->Exec("SELECT count(*), count(val_loss), sum(train_loss) FROM trial_metrics");
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->GetInt64(0, 0), 20);
  EXPECT_EQ(view->GetInt64(0, 1), 1);
  EXPECT_DOUBLE_EQ(view->GetDouble(0, 2), 210);  // 1 + ... + 20, each step once
}

// Issue 16's figures as typed columns that plain SQL reads by trial, step and
// layer: layer_diagnostics, trial_metrics.output_log_z (its step-0 row holds
// l0) and trials.init_val_loss; batches stored before migration 0011 have no
// output_log_z array and still read.
TEST(DiagnosticsStorageTest, TypedColumnsQueryableByTrialStepAndLayer) {
  LeasedStore s;
  ASSERT_NO_FATAL_FAILURE(OpenLeasedStore("diagnostics", 2, absl::Minutes(1), &s));
  const std::string& conninfo = s.conninfo;
  Store* store = s.store.get();
  const int64_t w = s.worker;
  const std::vector<v1::Trial>& trials = s.trials;
  // Trial 0: evaluations at steps 0, 10, 20 of 3 blocks; block l's logit at
  // step s is 10 * trial + l + s / 10, its fc2 ratio (s + l) / 1000.
  for (int k = 0; k < 2; ++k) {
    const v1::Trial& t = trials[k];
    v1::ReportProgressRequest req = testing::ProgressOf(w, t);
    for (int step = 0; step <= 20; ++step) {
      v1::MetricPoint* p = req.add_points();
      p->set_step(step);
      if (step > 0) p->set_train_loss(6.0 - 0.1 * step);
      if (step % 10 == 0) {
        p->set_val_loss(step == 0 ? 5.5 + k : 5.0 - 0.1 * step);
        p->set_output_log_z(5.0 + k - step / 100.0);
        v1::StepDiagnostics* d = req.add_diagnostics();
        d->set_step(step);
        for (int layer = 0; layer < 3; ++layer) {
          v1::LayerDiagnostics* l = d->add_layers();
          l->set_layer(layer);
          l->set_max_attn_logit(10.0 * k + layer + step / 10.0);
          if (step > 0) l->set_update_ratio_fc2((step + layer) / 1000.0);
        }
      }
    }
    ASSERT_TRUE(store->ReportProgress(req, kT0).ok());
    ASSERT_TRUE(store->ReportProgress(req, kT0).ok());  // re-sent: stored once
    v1::FinishTrialRequest f = testing::FinishOf(w, t, v1::TRIAL_SUCCEEDED);
    f.mutable_result()->set_final_val_loss(3.0);
    if (k == 0) f.mutable_result()->set_init_val_loss(5.5);
    ASSERT_TRUE(store->FinishTrial(f, kT0).ok());
  }
  auto conn = Connect(conninfo);
  ASSERT_NE(conn, nullptr);
  const std::string t0 = absl::StrCat(trials[0].id()), t1 = absl::StrCat(trials[1].id());
  auto types = conn->Exec(
      "SELECT pg_typeof(step)::text, pg_typeof(layer)::text, pg_typeof(max_attn_logit)::text,"
      " pg_typeof(update_ratio_fc2)::text FROM layer_diagnostics LIMIT 1");
  ASSERT_TRUE(types.ok()) << types.status();
  EXPECT_EQ(types->GetString(0, 0), "integer");
  EXPECT_EQ(types->GetString(0, 1), "integer");
  EXPECT_EQ(types->GetString(0, 2), "double precision");
  EXPECT_EQ(types->GetString(0, 3), "double precision");
  auto counts = conn->Exec("SELECT count(*), count(DISTINCT (trial_id, step, layer)), count(update_ratio_fc2)"
                           " FROM layer_diagnostics");
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->GetInt64(0, 0), 18);  // 2 trials x 3 steps x 3 blocks, each once
  EXPECT_EQ(counts->GetInt64(0, 1), 18);
  EXPECT_EQ(counts->GetInt64(0, 2), 12);  // none at step 0
  auto one = conn->Exec("SELECT max_attn_logit, update_ratio_fc2, update_ratio_qkv IS NULL FROM layer_diagnostics"
                        " WHERE trial_id = $1 AND step = $2 AND layer = $3",
                        PgParams().Add(trials[1].id()).Add(int64_t{20}).Add(int64_t{2}));
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->rows(), 1);
  EXPECT_DOUBLE_EQ(one->GetDouble(0, 0), 14.0);
  EXPECT_DOUBLE_EQ(one->GetDouble(0, 1), 0.022);
  EXPECT_TRUE(one->GetBool(0, 2));
  // The worst block per step of trial 0, as a dashboard asks it.
  auto worst = conn->Exec("SELECT step, max(max_attn_logit) FROM layer_diagnostics WHERE trial_id = $1"
                          " GROUP BY step ORDER BY step", PgParams().Add(trials[0].id()));
  ASSERT_TRUE(worst.ok()) << worst.status();
  ASSERT_EQ(worst->rows(), 3);
  EXPECT_EQ(worst->GetInt64(2, 0), 20);
  EXPECT_DOUBLE_EQ(worst->GetDouble(2, 1), 4.0);
  // l0: trials.init_val_loss where FinishTrial said it, and the step-0 row.
  auto l0 = conn->Exec("SELECT t.id, t.init_val_loss, m.val_loss, m.output_log_z, m.train_loss IS NULL"
                       " FROM trials t JOIN trial_metrics m ON m.trial_id = t.id AND m.step = 0 ORDER BY t.id");
  ASSERT_TRUE(l0.ok()) << l0.status();
  ASSERT_EQ(l0->rows(), 2);
  EXPECT_EQ(absl::StrCat(l0->GetInt64(0, 0)), t0);
  EXPECT_DOUBLE_EQ(l0->GetDouble(0, 1), 5.5);
  EXPECT_DOUBLE_EQ(l0->GetDouble(0, 2), 5.5);
  EXPECT_DOUBLE_EQ(l0->GetDouble(0, 3), 5.0);
  EXPECT_TRUE(l0->GetBool(0, 4));
  EXPECT_TRUE(l0->IsNull(1, 1));  // trial 1 finished without it
  EXPECT_DOUBLE_EQ(l0->GetDouble(1, 2), 6.5);
  auto log_z = conn->Exec("SELECT count(output_log_z), pg_typeof(min(output_log_z))::text FROM trial_metrics");
  ASSERT_TRUE(log_z.ok()) << log_z.status();
  EXPECT_EQ(log_z->GetInt64(0, 0), 6);
  EXPECT_EQ(log_z->GetString(0, 1), "double precision");

  // A batch stored before 0011 has no output_log_z array: its steps still
  // read, with NULL there.
  ASSERT_TRUE(conn->Exec("UPDATE trial_metric_batches SET output_log_z = NULL WHERE trial_id = $1",
                         PgParams().Add(trials[1].id())).ok());
  auto before = conn->Exec("SELECT count(*), count(output_log_z), count(train_loss) FROM trial_metrics"
                           " WHERE trial_id = $1", PgParams().Add(trials[1].id()));
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(before->GetInt64(0, 0), 21);
  EXPECT_EQ(before->GetInt64(0, 1), 1);  // only step 0's (trial_metric_late)
  EXPECT_EQ(before->GetInt64(0, 2), 20);
}

// The scheduler reads a trial's config from config_pb (0007_trial_config_pb.sql),
// the same TrainConfig as the queryable jsonb column; trials stored before
// that migration have no config_pb and are read from the JSON.
TEST(ConfigStorageTest, BinaryCopyMatchesTheJsonAndOlderRowsReadTheJson) {
  const std::string conninfo = NewDatabase("config_pb");
  // Whatever the database's bytea output format.
  std::unique_ptr<PgConnection> setup = Connect(conninfo);
  ASSERT_NE(setup, nullptr);
  ASSERT_TRUE(setup
                  ->Exec("DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET bytea_output = escape',"
                         " current_database()); END $$")
                  .ok());
  std::unique_ptr<Store> store = OpenStore(conninfo);
  ASSERT_NE(store, nullptr);
  v1::SweepSpec spec;
  spec.set_name("configs");
  spec.set_max_attempts(1);
  std::vector<NewTrial> trials(2);
  for (int i = 0; i < 2; ++i) {
    trials[i].index = i;
    trials[i].config.set_placement(i == 0 ? "post" : "pre");
    trials[i].config.set_lr(3e-4 * (i + 1));
    trials[i].config.set_warmup_steps(400);
    trials[i].config.set_layers(6);
    trials[i].config.set_task("translate");
  }
  auto created = store->CreateSweep("", spec, trials, kT0);
  ASSERT_TRUE(created.ok()) << created.status();
  auto conn = Connect(conninfo);
  ASSERT_NE(conn, nullptr);
  auto stored = conn->Exec(
      "SELECT count(*), count(config_pb), bool_and(config ->> 'placement' IN ('post', 'pre')) FROM trials");
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->GetInt64(0, 0), 2);
  EXPECT_EQ(stored->GetInt64(0, 1), 2);
  EXPECT_TRUE(stored->GetBool(0, 2));

  ASSERT_TRUE(conn->Exec("UPDATE trials SET config_pb = NULL WHERE trial_index = 1").ok());
  auto listed = store->ListTrials(created->sweep.id(), v1::TRIAL_STATE_UNSPECIFIED, -1, 10);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ((*listed)[i].config().SerializeAsString(), trials[i].config.SerializeAsString()) << i;
  }

  // Bytes that are not a TrainConfig are reported, not passed on.
  ASSERT_TRUE(conn->Exec("UPDATE trials SET config_pb = '\\xffff' WHERE trial_index = 0").ok());
  auto bad = store->GetTrial((*listed)[0].id());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(bad.status().message(), HasSubstr("config_pb"));
}

// sweeps.open_trials (0006_open_trials.sql) always equals the sweep's
// PENDING + RUNNING trials, through finishing, expiry (requeued or failed)
// and cancellation, and completes the sweep when it reaches 0.
TEST(OpenTrialsTest, CountFollowsEveryTransitionAndCompletesTheSweep) {
  const std::string conninfo = NewDatabase("open_trials");
  std::unique_ptr<Store> opened = OpenStore(conninfo);
  ASSERT_NE(opened, nullptr);
  Store& store = *opened;
  auto conn = Connect(conninfo);
  ASSERT_NE(conn, nullptr);
  auto expect_consistent = [&](int64_t sweep_id, int64_t open, const std::string& state) {
    auto r = conn->Exec(
        "SELECT s.open_trials, (SELECT count(*) FROM trials t WHERE t.sweep_id = s.id"
        " AND t.state IN ('PENDING', 'RUNNING')), s.state FROM sweeps s WHERE s.id = $1",
        PgParams().Add(sweep_id));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->GetInt64(0, 0), open);
    EXPECT_EQ(r->GetInt64(0, 1), open);
    EXPECT_EQ(r->GetString(0, 2), state);
  };
  // An expired lease is an interruption: these sweeps allow as many of
  // them as they allow attempts.
  auto create = [&](int n, int max_attempts) {
    auto created = CreateSweepOf(store, "open", n, max_attempts, max_attempts);
    EXPECT_TRUE(created.ok()) << created.status();
    return created.ok() ? created->sweep.id() : 0;
  };
  const int64_t w = RegisterWorker(store);
  auto lease = [&] {
    const std::vector<v1::Trial> t = LeaseTrials(store, w, 1, absl::Minutes(1));
    return t.empty() ? v1::Trial() : t[0];
  };
  auto finish = [&](const v1::Trial& t, absl::Time at) {
    v1::FinishTrialRequest f = testing::FinishOf(w, t, v1::TRIAL_SUCCEEDED);
    auto done = store.FinishTrial(f, at, nullptr);
    EXPECT_TRUE(done.ok()) << done.status();
  };

  // A: finished, requeued by expiry, then cancelled.
  const int64_t a = create(4, 2);
  expect_consistent(a, 4, "RUNNING");
  v1::Trial a1 = lease(), a2 = lease();
  finish(a1, kT0);
  finish(a1, kT0);  // re-sent: counted once
  expect_consistent(a, 3, "RUNNING");
  ASSERT_TRUE(store.ExpireLeases(kT0 + absl::Minutes(2)).ok());  // a2 back to PENDING
  expect_consistent(a, 3, "RUNNING");
  ASSERT_TRUE(store.CancelSweep(a, kT0 + absl::Minutes(3)).ok());
  expect_consistent(a, 0, "CANCELLED");

  // B: one finished, the last one fails by expiry: complete at the expiry.
  const int64_t b = create(2, 1);
  v1::Trial b1 = lease(), b2 = lease();
  finish(b1, kT0 + absl::Minutes(4));
  expect_consistent(b, 1, "RUNNING");
  const absl::Time expiry = kT0 + absl::Minutes(10);
  auto expired = store.ExpireLeases(expiry);
  ASSERT_TRUE(expired.ok()) << expired.status();
  EXPECT_EQ(expired->failed, 1);
  expect_consistent(b, 0, "COMPLETED");
  auto sweep = store.GetSweep(b);
  ASSERT_TRUE(sweep.ok());
  EXPECT_EQ(sweep->finished_at().seconds(), absl::ToUnixSeconds(expiry));

  // C: completed by its last FinishTrial, at that call's time.
  const int64_t c = create(1, 1);
  const absl::Time last = kT0 + absl::Minutes(20);
  finish(lease(), last);
  expect_consistent(c, 0, "COMPLETED");
  sweep = store.GetSweep(c);
  ASSERT_TRUE(sweep.ok());
  EXPECT_EQ(sweep->finished_at().seconds(), absl::ToUnixSeconds(last));
  (void)a2;
  (void)b2;
}

TEST(ConnectionLossTest, StoreRecoversWhenTheDatabaseComesBack) {
  auto pg = testing::PostgresInstance::Start();
  ASSERT_TRUE(pg.ok()) << pg.status();
  auto conninfo = (*pg)->CreateDatabase("recovery");
  ASSERT_TRUE(conninfo.ok());
  PostgresStoreOptions options;
  options.connect.conninfo = *conninfo;
  options.connect.connect_timeout = absl::Seconds(2);
  options.pool_size = 2;
  auto opened = OpenPostgresStore(options);
  ASSERT_TRUE(opened.ok()) << opened.status();
  Store* store = opened->store.get();
  auto sweep = CreateSweepOf(*store, "r", 1, 3);
  ASSERT_TRUE(sweep.ok());
  ASSERT_TRUE(store->GetSweep(sweep->sweep.id()).ok());  // a pooled connection now exists

  ASSERT_TRUE((*pg)->Stop().ok());
  auto down = store->GetSweep(sweep->sweep.id());
  EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable) << down.status();
  auto still_down = store->Stats(kT0);
  EXPECT_EQ(still_down.status().code(), absl::StatusCode::kUnavailable);

  ASSERT_TRUE((*pg)->StartAgain().ok());
  // Back-off is at most 5 s; within 10 s the same store object serves again.
  absl::StatusOr<v1::Sweep> back = absl::UnavailableError("not yet");
  for (int i = 0; i < 100 && !back.ok(); ++i) {
    back = store->GetSweep(sweep->sweep.id());
    if (!back.ok()) absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->trial_count(), 1);
  v1::RegisterWorkerRequest reg;
  reg.set_name("after");
  EXPECT_TRUE(store->RegisterWorker(reg, kT0).ok());
}

// A connection the server dropped while it sat idle (a crash restart) must
// not fail the next call: libpq reports the loss on that connection's next
// query with no SQLSTATE while PQstatus still says CONNECTION_OK. It is
// UNAVAILABLE and closed, so the store's retry on a fresh connection runs.
TEST(ConnectionLossTest, IdleConnectionsLostInACrashFailNoCall) {
  testing::PostgresInstanceOptions pg_options;
  pg_options.fast_unsafe = false;  // a crash keeps what was committed
  auto pg = testing::PostgresInstance::Start(pg_options);
  ASSERT_TRUE(pg.ok()) << pg.status();
  auto conninfo = (*pg)->CreateDatabase("idle_loss");
  ASSERT_TRUE(conninfo.ok());

  PgConnectOptions connect;
  connect.conninfo = *conninfo;
  auto conn = PgConnection::Connect(connect);
  ASSERT_TRUE(conn.ok()) << conn.status();
  ASSERT_TRUE((*conn)->Exec("SELECT 1").ok());
  ASSERT_TRUE((*pg)->CrashRestart().ok());
  auto first = (*conn)->Exec("SELECT 1");
  EXPECT_EQ(first.status().code(), absl::StatusCode::kUnavailable) << first.status();
  EXPECT_TRUE(IsDatabaseError(first.status()));
  EXPECT_TRUE((*conn)->broken());

  PostgresStoreOptions options;
  options.connect = connect;
  options.pool_size = 2;
  auto opened = OpenPostgresStore(options);
  ASSERT_TRUE(opened.ok()) << opened.status();
  Store* store = opened->store.get();
  auto sweep = CreateSweepOf(*store, "idle", 1, 3);
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  ASSERT_TRUE(store->GetSweep(sweep->sweep.id()).ok());
  ASSERT_TRUE((*pg)->CrashRestart().ok());
  // Every pooled connection died; each call still succeeds at once.
  for (int i = 0; i < 4; ++i) {
    auto got = store->GetSweep(sweep->sweep.id());
    ASSERT_TRUE(got.ok()) << "call " << i << ": " << got.status();
    EXPECT_EQ(got->trial_count(), 1);
  }
  v1::RegisterWorkerRequest reg;
  reg.set_name("after-crash");
  EXPECT_TRUE(store->RegisterWorker(reg, kT0).ok());
}

}  // namespace
}  // namespace normsweep::db

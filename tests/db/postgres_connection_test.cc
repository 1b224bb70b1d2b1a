// PostgreSQL connections (db/pg_connection.h) and the store over them:
// statement splitting, parameters, binary arrays, timeouts (the server's and
// the client's), the password kept out of messages, and connection loss
// (a server stopped and started again, a crash restart) that the store
// recovers from.
#include <signal.h>

#include <cstdint>
#include <limits>
#include <string>

#include "db/migrations.h"
#include "db/pg_connection.h"
#include "db/postgres_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/postgres_instance.h"
#include "tests/common/test_time.h"
#include "tests/db/postgres_fixture.h"

namespace normsweep::db {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using testing::kT0;

TEST(SplitSqlStatementsTest, SplitsOutsideQuotesAndComments) {
  EXPECT_THAT(SplitSqlStatements("SELECT 1; SELECT 'a;b';\n-- c; d\nSELECT $$x;y$$;\n-- end\n"),
              ElementsAre("SELECT 1", " SELECT 'a;b'", "\n-- c; d\nSELECT $$x;y$$"));
  EXPECT_THAT(SplitSqlStatements("CREATE FUNCTION f() RETURNS int AS $body$ SELECT 1; $body$ LANGUAGE sql"),
              ElementsAre("CREATE FUNCTION f() RETURNS int AS $body$ SELECT 1; $body$ LANGUAGE sql"));
  EXPECT_THAT(SplitSqlStatements("SELECT $1;"), ElementsAre("SELECT $1"));
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

// Its own server: the test stops and restarts it.
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

#include "db/pg_connection.h"

#include <libpq-fe.h>
#include <poll.h>

#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "db/store.h"

namespace normsweep::db {
namespace {

absl::Status StatusFromResultUnmarked(PGconn* conn, const PGresult* res) {
  const char* state = res != nullptr ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  std::string message = res != nullptr ? PQresultErrorMessage(res) : "";
  if (message.empty()) message = PQerrorMessage(conn);
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  message = "database: " + message;
  std::string sqlstate = state != nullptr ? state : "";
  // A fatal error without a SQLSTATE is libpq's own: the connection broke
  // ("server closed the connection unexpectedly"), even where PQstatus still
  // says CONNECTION_OK (the first query on a connection that the server
  // dropped while it sat idle in the pool).
  const bool client_side = res != nullptr && PQresultStatus(res) == PGRES_FATAL_ERROR && sqlstate.empty();
  if (PQstatus(conn) != CONNECTION_OK || client_side || sqlstate.rfind("08", 0) == 0 || sqlstate == "57P01" ||
      sqlstate == "57P02" || sqlstate == "57P03") {
    return absl::UnavailableError(message);
  }
  if (sqlstate == "57014") return absl::DeadlineExceededError(message);  // statement timeout
  if (sqlstate == "23505") return absl::AlreadyExistsError(message);
  if (sqlstate == "40001" || sqlstate == "40P01") return absl::AbortedError(message);
  if (sqlstate.rfind("22", 0) == 0 || sqlstate.rfind("23", 0) == 0) {
    return absl::InvalidArgumentError(message);  // data exception, constraint
  }
  return absl::InternalError(message);
}

absl::Status StatusFromResult(PGconn* conn, const PGresult* res) {
  return MarkDatabaseError(StatusFromResultUnmarked(conn, res));
}

}  // namespace

void PgConnDeleter::operator()(pg_conn* conn) const { PQfinish(conn); }
void PgResultDeleter::operator()(pg_result* res) const { PQclear(res); }

int PgResult::rows() const { return PQntuples(res_.get()); }

int PgResult::column(const char* name) const { return PQfnumber(res_.get(), name); }

bool PgResult::IsNull(int row, int col) const { return PQgetisnull(res_.get(), row, col) != 0; }

int64_t PgResult::affected() const {
  const char* n = PQcmdTuples(res_.get());
  return (n == nullptr || *n == '\0') ? 0 : std::strtoll(n, nullptr, 10);
}

std::string PgResult::GetString(int row, int col) const {
  if (IsNull(row, col)) return "";
  return std::string(PQgetvalue(res_.get(), row, col), PQgetlength(res_.get(), row, col));
}

std::string_view PgResult::GetBytes(int row, int col) const {
  if (IsNull(row, col)) return {};
  return std::string_view(PQgetvalue(res_.get(), row, col), PQgetlength(res_.get(), row, col));
}

int64_t PgResult::GetInt64(int row, int col) const {
  if (IsNull(row, col)) return 0;
  return std::strtoll(PQgetvalue(res_.get(), row, col), nullptr, 10);
}

double PgResult::GetDouble(int row, int col) const {
  if (IsNull(row, col)) return 0;
  // strtod parses "NaN", "Infinity" and "-Infinity" as PostgreSQL prints them.
  return std::strtod(PQgetvalue(res_.get(), row, col), nullptr);
}

bool PgResult::GetBool(int row, int col) const {
  return !IsNull(row, col) && PQgetvalue(res_.get(), row, col)[0] == 't';
}

std::optional<double> PgResult::GetOptionalDouble(int row, int col) const {
  if (IsNull(row, col)) return std::nullopt;
  return GetDouble(row, col);
}

std::optional<absl::Time> PgResult::GetOptionalMicros(int row, int col) const {
  if (IsNull(row, col)) return std::nullopt;
  return absl::FromUnixMicros(GetInt64(row, col));
}

std::string PgParams::FormatDouble(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  // The shortest text that reads back as the same double (strtod, as
  // PostgreSQL's float8in does); several times cheaper than "%.17g".
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, end);
}

void PgArray::AddString(std::string_view v) {
  std::string quoted = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  quoted += '"';
  Append(quoted);
}

absl::StatusOr<std::unique_ptr<PgConnection>> PgConnection::Connect(const PgConnectOptions& options) {
  const std::string connect_timeout =
      std::to_string(std::max<int64_t>(1, absl::ToInt64Seconds(options.connect_timeout)));
  // dbname is expanded (a URL or key=value string); later keywords override.
  const char* keywords[] = {"dbname", "connect_timeout", "application_name", "keepalives",
                            "keepalives_idle", "keepalives_interval", "keepalives_count", nullptr};
  const char* values[] = {options.conninfo.c_str(), connect_timeout.c_str(),
                          options.application_name.c_str(), "1", "10", "5", "3", nullptr};
  std::unique_ptr<PGconn, PgConnDeleter> conn(PQconnectdbParams(keywords, values, /*expand_dbname=*/1));
  if (conn == nullptr) return MarkDatabaseError(absl::ResourceExhaustedError("database: out of memory"));
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    // libpq's message names host and port, not the password.
    std::string message = PQerrorMessage(conn.get());
    while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
    return MarkDatabaseError(absl::UnavailableError("database: cannot connect: " + message));
  }
  // NOTICEs ("already exists, skipping") are not errors; keep them off stderr.
  PQsetNoticeProcessor(conn.get(), [](void*, const char*) {}, nullptr);
  // Sending never blocks either: Await waits for it with the deadline.
  if (PQsetnonblocking(conn.get(), 1) != 0) {
    return MarkDatabaseError(absl::InternalError("database: cannot set the connection nonblocking"));
  }
  std::unique_ptr<PgConnection> c(new PgConnection(conn.release(), options));
  PgParams p;
  p.Add(absl::StrCat(absl::ToInt64Milliseconds(options.statement_timeout)));
  p.Add(options.generic_plans ? "force_generic_plan" : "auto");
  // No JIT: our statements are short and prepared; a generic plan whose
  // estimate crossed jit_above_cost was compiled again on every execution
  // (scheduler/README.md).
  absl::StatusOr<PgResult> r =
      c->Exec("SELECT set_config('statement_timeout', $1, false), set_config('jit', 'off', false),"
              " set_config('plan_cache_mode', $2, false)", p);
  if (!r.ok()) return r.status();
  return c;
}

namespace {

// PgParams as libpq takes them. Lengths and formats only matter for binary
// values (text is NUL-terminated); libpq wants them for all or none.
struct LibpqParams {
  explicit LibpqParams(const PgParams& params) : binary(params.binary()), formats(params.formats()) {
    values.reserve(params.values().size());
    lengths.reserve(params.values().size());
    for (const auto& v : params.values()) {
      values.push_back(v.has_value() ? v->data() : nullptr);
      lengths.push_back(v.has_value() ? static_cast<int>(v->size()) : 0);
    }
  }
  int count() const { return static_cast<int>(values.size()); }
  const int* length_data() const { return binary ? lengths.data() : nullptr; }
  const int* format_data() const { return binary ? formats.data() : nullptr; }

  const bool binary;
  const std::vector<int>& formats;
  std::vector<const char*> values;
  std::vector<int> lengths;
};

}  // namespace

PgConnection::PgConnection(pg_conn* conn, const PgConnectOptions& options)
    : conn_(conn), client_timeout_(options.ClientTimeout()),
      cancel_wait_(std::max(options.client_timeout_margin, absl::ZeroDuration())) {}

bool PgConnection::broken() const { return conn_ == nullptr || PQstatus(conn_.get()) != CONNECTION_OK; }

bool PgConnection::idle() const {
  return conn_ != nullptr && PQtransactionStatus(conn_.get()) == PQTRANS_IDLE;
}

namespace {

absl::Status Closed() {
  return MarkDatabaseError(
      absl::UnavailableError("database: connection closed after a query that did not answer in time"));
}

enum class Ready { kYes, kTimeout, kError };

// Waits until the connection's socket is ready for `events` or the deadline.
Ready WaitForSocket(PGconn* conn, short events, absl::Time deadline) {
  const int fd = PQsocket(conn);
  if (fd < 0) return Ready::kError;
  while (true) {
    int timeout_ms = -1;
    if (deadline != absl::InfiniteFuture()) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) return Ready::kTimeout;
      timeout_ms = static_cast<int>(
          std::min<int64_t>(absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))), INT_MAX));
    }
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, timeout_ms);
    if (n > 0) return Ready::kYes;
    if (n < 0 && errno != EINTR) return Ready::kError;
  }
}

// Sends what libpq holds (nonblocking mode), reading meanwhile as libpq
// asks; false on the deadline.
bool Flush(PGconn* conn, absl::Time deadline) {
  while (true) {
    const int pending = PQflush(conn);
    if (pending <= 0) return true;  // sent, or failed (PQgetResult reports it)
    const Ready ready = WaitForSocket(conn, POLLIN | POLLOUT, deadline);
    if (ready == Ready::kTimeout) return false;
    if (ready == Ready::kError || PQconsumeInput(conn) == 0) return true;
  }
}

// Reads until PQgetResult would not block; false on the deadline.
bool AwaitInput(PGconn* conn, absl::Time deadline) {
  while (PQisBusy(conn) != 0) {
    const Ready ready = WaitForSocket(conn, POLLIN, deadline);
    if (ready == Ready::kTimeout) return false;
    if (ready == Ready::kError || PQconsumeInput(conn) == 0) return true;  // PQgetResult reports it
  }
  return true;
}

// Every result of the query, keeping the last, as PQexec does; false on the
// deadline (*last then holds what came before it).
bool AwaitResults(PGconn* conn, absl::Time deadline, PGresult** last) {
  while (true) {
    if (!AwaitInput(conn, deadline)) return false;
    PGresult* r = PQgetResult(conn);
    if (r == nullptr) return true;
    PQclear(*last);
    *last = r;
    if (PQstatus(conn) == CONNECTION_BAD) return true;
  }
}

absl::Time DeadlineAfter(absl::Duration timeout) {
  return timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + timeout;
}

}  // namespace

absl::StatusOr<PgResult> PgConnection::Await(int sent) {
  PGconn* conn = conn_.get();
  if (sent == 0) return StatusFromResult(conn, nullptr);
  PGresult* last = nullptr;  // owned here until Check takes it
  const absl::Time deadline = DeadlineAfter(client_timeout_);
  const bool flushed = Flush(conn, deadline);
  if (flushed && AwaitResults(conn, deadline, &last)) return Check(last);
  const std::string waited =
      absl::StrCat("database: no answer within ", absl::FormatDuration(client_timeout_), " (client-side timeout)");
  // The server may be stuck, or the network: cancel the query and wait for
  // its answer a while longer, so that the connection can be used again. A
  // half-sent query, or a cancel that goes unanswered, closes it instead.
  bool cancelled = false;
  if (flushed) {
    if (PGcancel* cancel = PQgetCancel(conn); cancel != nullptr) {
      char error[256] = "";
      cancelled = PQcancel(cancel, error, sizeof error) == 1;
      PQfreeCancel(cancel);
    }
  }
  if (cancelled && AwaitResults(conn, DeadlineAfter(cancel_wait_), &last) && PQstatus(conn) == CONNECTION_OK) {
    const ExecStatusType status = last != nullptr ? PQresultStatus(last) : PGRES_FATAL_ERROR;
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return Check(last);  // it ended meanwhile
    PQclear(last);
    return MarkDatabaseError(absl::DeadlineExceededError(absl::StrCat(waited, "; cancelled")));
  }
  PQclear(last);
  conn_.reset();
  return MarkDatabaseError(absl::DeadlineExceededError(absl::StrCat(waited, "; connection closed")));
}

absl::StatusOr<PgResult> PgConnection::Exec(std::string_view sql, const PgParams& params) {
  return Send(sql, params, /*result_format=*/0);
}

absl::StatusOr<PgResult> PgConnection::ExecBinaryResults(std::string_view sql, const PgParams& params) {
  return Send(sql, params, /*result_format=*/1);
}

absl::StatusOr<PgResult> PgConnection::Send(std::string_view sql, const PgParams& params, int result_format) {
  if (conn_ == nullptr) return Closed();
  const LibpqParams p(params);
  std::string query(sql);
  return Await(PQsendQueryParams(conn_.get(), query.c_str(), p.count(), /*paramTypes=*/nullptr, p.values.data(),
                                 p.length_data(), p.format_data(), result_format));
}

absl::StatusOr<PgResult> PgConnection::Check(PGresult* raw) {
  PgResult result(raw);  // owns raw (PQclear on every path)
  ExecStatusType status = raw != nullptr ? PQresultStatus(raw) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    absl::Status error = StatusFromResult(conn_.get(), raw);
    // Lost: closed here, so that broken() says so, the pool drops it and
    // the caller's retry on a fresh connection runs.
    if (absl::IsUnavailable(error)) conn_.reset();
    return error;
  }
  return result;
}

absl::StatusOr<PgResult> PgConnection::ExecPrepared(const std::string& name, std::string_view sql,
                                                    const PgParams& params) {
  if (conn_ == nullptr) return Closed();
  const int n = static_cast<int>(params.values().size());
  if (!prepared_.contains(name)) {
    std::string query(sql);
    absl::StatusOr<PgResult> prepared =
        Await(PQsendPrepare(conn_.get(), name.c_str(), query.c_str(), n, /*paramTypes=*/nullptr));
    if (!prepared.ok()) return prepared.status();
    prepared_.insert(name);
  }
  const LibpqParams p(params);
  return Await(PQsendQueryPrepared(conn_.get(), name.c_str(), n, p.values.data(), p.length_data(), p.format_data(),
                                   /*resultFormat=*/0));
}

std::string PgConnection::Describe() const {
  if (conn_ == nullptr) return "(closed)";
  const char* host = PQhost(conn_.get());
  const char* port = PQport(conn_.get());
  const char* db = PQdb(conn_.get());
  const char* user = PQuser(conn_.get());
  return absl::StrCat(host ? host : "", ":", port ? port : "", "/", db ? db : "", " as ",
                      user ? user : "");
}

PgPool::PgPool(PgConnectOptions options, int max_connections)
    : options_(std::move(options)), max_connections_(std::max(1, max_connections)) {}

absl::StatusOr<PgPool::Lease> PgPool::Acquire() {
  {
    absl::MutexLock lock(&mu_);
    auto available = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !idle_.empty() || open_ < max_connections_;
    };
    mu_.Await(absl::Condition(&available));
    if (!idle_.empty()) {
      std::unique_ptr<PgConnection> conn = std::move(idle_.back());
      idle_.pop_back();
      return Lease(this, std::move(conn));
    }
    if (absl::Now() < next_connect_) {
      return MarkDatabaseError(
          absl::UnavailableError("database unavailable (reconnecting with back-off): " + last_error_));
    }
    ++open_;
  }
  absl::StatusOr<std::unique_ptr<PgConnection>> conn = PgConnection::Connect(options_);
  absl::MutexLock lock(&mu_);
  if (!conn.ok()) {
    --open_;
    backoff_ = backoff_ == absl::ZeroDuration() ? absl::Milliseconds(100)
                                                : std::min(backoff_ * 2, absl::Seconds(5));
    next_connect_ = absl::Now() + backoff_;
    last_error_ = std::string(conn.status().message());
    return conn.status();
  }
  backoff_ = absl::ZeroDuration();
  next_connect_ = absl::InfinitePast();
  return Lease(this, *std::move(conn));
}

void PgPool::DropIdle() {
  std::vector<std::unique_ptr<PgConnection>> dropped;
  {
    absl::MutexLock lock(&mu_);
    dropped.swap(idle_);
    open_ -= static_cast<int>(dropped.size());
  }
  // Closed outside the lock (PQfinish may write to the socket).
}

void PgPool::Return(std::unique_ptr<PgConnection> conn) {
  absl::MutexLock lock(&mu_);
  // A connection left inside a failed transaction or broken is not reused.
  if (conn->broken() || !conn->idle()) {
    --open_;
    return;
  }
  idle_.push_back(std::move(conn));
}

}  // namespace normsweep::db

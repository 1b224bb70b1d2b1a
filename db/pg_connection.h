// RAII wrappers over libpq, the only code that calls it (db/pg_connection.cc;
// this header names libpq's types but does not include libpq-fe.h). Every
// query goes through PQsendQueryParams or a prepared statement with text
// parameters (binary for PgArrayOf arrays), waited for with a client-side
// deadline; every result's status is checked; results are cleared by their
// owner. A PgConnection is used by one thread at a time (PgPool hands them
// out). db-internal: outside db/, only tests include it (to look at rows).
#ifndef NORMSWEEP_DB_PG_CONNECTION_H_
#define NORMSWEEP_DB_PG_CONNECTION_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "db/pg_connect_options.h"

// libpq's PGconn and PGresult (typedefs of these in libpq-fe.h).
struct pg_conn;
struct pg_result;

namespace normsweep::db {

struct PgConnDeleter {
  void operator()(pg_conn* conn) const;  // PQfinish
};
struct PgResultDeleter {
  void operator()(pg_result* res) const;  // PQclear
};

// One query result (rows of text values).
class PgResult {
 public:
  explicit PgResult(pg_result* res) : res_(res) {}
  int rows() const;
  int64_t affected() const;  // rows touched by INSERT/UPDATE/DELETE
  // The number of the column that the statement names `name` (lower case, as
  // unquoted SQL names and AS aliases are), or -1 (PQfnumber). Look columns
  // up once per result, not once per row.
  int column(const char* name) const;
  bool IsNull(int row, int col) const;
  std::string GetString(int row, int col) const;
  // The value's bytes as they came (a BINARY cursor's: PostgreSQL's binary
  // send format); empty when NULL. Valid while this result lives.
  std::string_view GetBytes(int row, int col) const;
  int64_t GetInt64(int row, int col) const;   // 0 when NULL
  double GetDouble(int row, int col) const;   // handles NaN/Infinity; 0 when NULL
  bool GetBool(int row, int col) const;
  std::optional<double> GetOptionalDouble(int row, int col) const;
  // timestamptz selected as epoch microseconds (bigint); nullopt when NULL.
  std::optional<absl::Time> GetOptionalMicros(int row, int col) const;

 private:
  std::unique_ptr<pg_result, PgResultDeleter> res_;
};

template <typename T>
class PgArrayOf;

// Query parameters, sent as text, except arrays built with PgArrayOf (sent in
// PostgreSQL's binary array format). nullopt is SQL NULL.
class PgParams {
 public:
  PgParams& Add(std::string v) { return Push(std::move(v), 0); }
  PgParams& Add(const char* v) { return Push(std::string(v), 0); }
  PgParams& Add(int64_t v) { return Push(std::to_string(v), 0); }
  PgParams& Add(int32_t v) { return Push(std::to_string(v), 0); }
  PgParams& Add(bool v) { return Push(v ? "true" : "false", 0); }
  PgParams& Add(double v) { return Push(FormatDouble(v), 0); }
  template <typename T>
  PgParams& Add(const PgArrayOf<T>& array) { return Push(array.Finish(), 1); }
  PgParams& AddMicros(absl::Time t) { return Add(absl::ToUnixMicros(t)); }
  PgParams& AddNull() {
    values_.emplace_back(std::nullopt);
    formats_.push_back(0);
    return *this;
  }
  template <typename T>
  PgParams& AddOptional(const std::optional<T>& v) {
    if (v.has_value()) return Add(*v);
    return AddNull();
  }
  const std::vector<std::optional<std::string>>& values() const { return values_; }
  // 0 text, 1 binary, per value; binary() when any is.
  const std::vector<int>& formats() const { return formats_; }
  bool binary() const { return binary_; }

  // Round-trip text for float8, including NaN and +-Infinity.
  static std::string FormatDouble(double v);

 private:
  PgParams& Push(std::string v, int format) {
    values_.emplace_back(std::move(v));
    formats_.push_back(format);
    binary_ = binary_ || format == 1;
    return *this;
  }
  std::vector<std::optional<std::string>> values_;
  std::vector<int> formats_;
  bool binary_ = false;
};

// A one-dimensional array parameter in PostgreSQL's binary format (what
// array_recv reads): nothing to format here and nothing to parse there
// (scheduler/README.md has the figures). T is int32_t (int[]), int64_t (bigint[]), double (float8[]) or
// std::string (text[]); the statement must cast its parameter to exactly
// that array type, or PostgreSQL refuses it ("binary data has array element
// type 23 (integer) instead of expected 20 (bigint)").
template <typename T>
class PgArrayOf {
 public:
  void Add(T v) {
    ++count_;
    if constexpr (std::is_same_v<T, std::string>) {
      PutInt32(static_cast<int32_t>(v.size()));
      body_ += v;
    } else if constexpr (std::is_same_v<T, double>) {
      uint64_t bits;
      std::memcpy(&bits, &v, sizeof bits);
      PutInt32(8);
      PutInt64(bits);
    } else if constexpr (std::is_same_v<T, int64_t>) {
      PutInt32(8);
      PutInt64(static_cast<uint64_t>(v));
    } else {
      static_assert(std::is_same_v<T, int32_t>, "PgArrayOf: int32_t, int64_t, double or std::string");
      PutInt32(4);
      PutInt32(v);
    }
  }
  void AddNull() {
    ++count_;
    has_null_ = true;
    PutInt32(-1);
  }
  void AddOptional(bool has, T v) {
    if (has) {
      Add(std::move(v));
    } else {
      AddNull();
    }
  }

  // The parameter's bytes: header (dimensions, null flag, element type,
  // length and lower bound) then the elements.
  std::string Finish() const {
    std::string out;
    Append32(out, count_ > 0 ? 1 : 0);
    Append32(out, has_null_ ? 1 : 0);
    Append32(out, kElementOid);
    if (count_ > 0) {
      Append32(out, static_cast<uint32_t>(count_));
      Append32(out, 1);  // lower bound: SQL arrays are 1-based
    }
    out += body_;
    return out;
  }

 private:
  static constexpr uint32_t kElementOid = std::is_same_v<T, int32_t>   ? 23    // int4
                                          : std::is_same_v<T, int64_t> ? 20    // int8
                                          : std::is_same_v<T, double>  ? 701   // float8
                                                                       : 25;   // text
  // Big-endian, as the wire format wants.
  static void Append32(std::string& out, uint32_t v) {
    const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                       static_cast<char>(v)};
    out.append(b, 4);
  }
  void PutInt32(int32_t v) { Append32(body_, static_cast<uint32_t>(v)); }
  void PutInt64(uint64_t v) {
    Append32(body_, static_cast<uint32_t>(v >> 32));
    Append32(body_, static_cast<uint32_t>(v & 0xffffffffu));
  }
  std::string body_;
  int count_ = 0;
  bool has_null_ = false;
};

// Builds a PostgreSQL array literal ("{1,2,NULL}") for one array parameter.
class PgArray {
 public:
  void Add(int64_t v) { Append(std::to_string(v)); }
  void Add(double v) { Append(PgParams::FormatDouble(v)); }
  void AddNull() { Append("NULL"); }
  void AddString(std::string_view v);  // quoted and escaped
  template <typename T>
  void AddOptional(bool has, T v) {
    if (has) Add(v); else AddNull();
  }
  std::string Finish() const { return "{" + body_ + "}"; }

 private:
  void Append(const std::string& item) {
    if (!body_.empty()) body_ += ',';
    body_ += item;
  }
  std::string body_;
};

class PgConnection {
 public:
  static absl::StatusOr<std::unique_ptr<PgConnection>> Connect(const PgConnectOptions& options);

  // PQsendQueryParams, then the answer; OK only for PGRES_COMMAND_OK /
  // PGRES_TUPLES_OK. Errors map SQLSTATE to a code: connection loss
  // UNAVAILABLE, statement timeout DEADLINE_EXCEEDED, unique violation
  // ALREADY_EXISTS, serialization or deadlock ABORTED, anything else
  // INTERNAL; all are marked (MarkDatabaseError).
  //
  // No answer within client_timeout() (PgConnectOptions::ClientTimeout) is
  // DEADLINE_EXCEEDED too, as pgBackRest's client does it: the query is
  // cancelled (PQcancel) and its answer waited for, the margin again; the
  // connection stays usable when it comes, and is closed (broken()) when it
  // does not. (libpq 15's PQcancel itself connects to the server without a
  // timeout: a host that drops packets can still hold it up.)
  absl::StatusOr<PgResult> Exec(std::string_view sql, const PgParams& params = PgParams());
  // The same, with every result value in PostgreSQL's binary send format
  // (PgResult::GetBytes): e.g. a FETCH of float8[] arrays, which text would
  // have the server format and the caller parse again.
  absl::StatusOr<PgResult> ExecBinaryResults(std::string_view sql, const PgParams& params = PgParams());
  // The same for a hot statement, prepared once per connection under `name`
  // (PQsendPrepare, then PQsendQueryPrepared: parameterised the same way, but
  // parsed and planned once instead of on every call). name must identify sql.
  absl::StatusOr<PgResult> ExecPrepared(const std::string& name, std::string_view sql,
                                        const PgParams& params = PgParams());

  // Lost, or closed after a query that did not answer its cancel.
  bool broken() const;
  // Not inside a transaction.
  bool idle() const;
  // host:port/dbname as user — never the password.
  std::string Describe() const;

  // The client-side deadline of each query (InfiniteDuration(): none). Code
  // that lifts the server's statement_timeout lifts this one too.
  absl::Duration client_timeout() const { return client_timeout_; }
  void set_client_timeout(absl::Duration timeout) { client_timeout_ = timeout; }

 private:
  PgConnection(pg_conn* conn, const PgConnectOptions& options);
  // The answer to the query just sent (sent: PQsend*'s return value), with
  // the client-side deadline and cancel.
  absl::StatusOr<PgResult> Await(int sent);
  // Exec and ExecBinaryResults: result_format 0 text, 1 binary.
  absl::StatusOr<PgResult> Send(std::string_view sql, const PgParams& params, int result_format);
  absl::StatusOr<PgResult> Check(pg_result* raw);

  std::unique_ptr<pg_conn, PgConnDeleter> conn_;  // null once closed after a timeout
  absl::Duration client_timeout_;
  const absl::Duration cancel_wait_;  // for the answer to a cancel
  std::set<std::string> prepared_;
};

// A fixed-size pool of connections, created on demand. A broken connection
// is dropped when returned; reconnecting backs off exponentially (100 ms
// doubling to 5 s) so that a database outage does not turn into a connect
// storm, and the pool recovers by itself when the database is back.
// Thread-safe: mu_ guards the idle list and the back-off state.
class PgPool {
 public:
  PgPool(PgConnectOptions options, int max_connections);

  class Lease {
   public:
    Lease(PgPool* pool, std::unique_ptr<PgConnection> conn) : pool_(pool), conn_(std::move(conn)) {}
    Lease(Lease&&) = default;
    ~Lease() { if (conn_) pool_->Return(std::move(conn_)); }
    PgConnection& operator*() { return *conn_; }
    PgConnection* operator->() { return conn_.get(); }

   private:
    PgPool* pool_;
    std::unique_ptr<PgConnection> conn_;
  };

  // Blocks while all connections are in use; UNAVAILABLE while the database
  // cannot be reached (during back-off, immediately).
  absl::StatusOr<Lease> Acquire();
  const PgConnectOptions& options() const { return options_; }
  // Closes every idle connection: one found lost means that the server went
  // away (a restart, a crash), so its idle siblings are lost too, and the
  // retry that follows must open a fresh one rather than take the next.
  void DropIdle();

 private:
  void Return(std::unique_ptr<PgConnection> conn);

  const PgConnectOptions options_;
  const int max_connections_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<PgConnection>> idle_ ABSL_GUARDED_BY(mu_);
  int open_ ABSL_GUARDED_BY(mu_) = 0;  // idle + in use + being opened
  absl::Duration backoff_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  absl::Time next_connect_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::string last_error_ ABSL_GUARDED_BY(mu_);
};

// Runs fn(conn) inside BEGIN ... COMMIT; rolls back when fn fails. When the
// connection turns out broken before anything ran (a stale pooled
// connection), drops the idle ones and retries once on a fresh one.
template <typename Fn>
absl::Status InTransaction(PgPool& pool, Fn&& fn);

}  // namespace normsweep::db

#include "db/pg_connection_inl.h"

#endif  // NORMSWEEP_DB_PG_CONNECTION_H_

// Reading query results into the API's messages: the column readers that
// PostgresStore (db/postgres_store.cc, db/postgres_hot_path.cc) and the
// analysis reads (db/sweep_analysis.cc) share, and the parsers of a trial's
// and a sweep's row. A db-internal header: it speaks PgResult.
#ifndef NORMSWEEP_DB_PG_ROWS_H_
#define NORMSWEEP_DB_PG_ROWS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "db/pg_connection.h"
#include "google/protobuf/util/time_util.h"
#include "normsweep/v1/sweep.pb.h"

// timestamptz <-> epoch microseconds, exactly (no float rounding), in the
// short statements written in C++ (those in db/sql spell it out).
#define NS_TS(n) "('epoch'::timestamptz + $" #n "::bigint * interval '1 microsecond')"
#define NS_MICROS(col) "(extract(epoch FROM " col ") * 1000000)::bigint"

// Sets the field only for a non-NULL value (mutable_x() would mark it present).
#define NS_SET_TIME(result, row, col, msg, field)                                                          \
  if (auto v = (result).GetOptionalMicros(row, col)) {                                                     \
    *(msg).mutable_##field() = google::protobuf::util::TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(*v)); \
  }

namespace normsweep::db {

// The number of the column that the statement names `name`, or INTERNAL.
absl::StatusOr<int> ColumnOf(const PgResult& r, const char* name);

// An int4 (or smaller bigint) column; 0 when NULL.
inline int32_t GetInt32(const PgResult& r, int row, int col) { return static_cast<int32_t>(r.GetInt64(row, col)); }
inline std::optional<int32_t> GetOptionalInt32(const PgResult& r, int row, int col) {
  if (r.IsNull(row, col)) return std::nullopt;
  return GetInt32(r, row, col);
}

// A result's columns read by name, for results of a few rows (the analysis
// views): each call looks its name up (PgResult::column, a comparison of
// names). Parsers of many rows look theirs up once (TrialColumns).
class NamedColumns {
 public:
  explicit NamedColumns(const PgResult& r) : r_(r) {}
  int32_t Int(int row, const char* name) const { return GetInt32(r_, row, r_.column(name)); }
  double Double(int row, const char* name) const { return r_.GetDouble(row, r_.column(name)); }
  std::optional<double> Optional(int row, const char* name) const { return r_.GetOptionalDouble(row, r_.column(name)); }
  std::string String(int row, const char* name) const { return r_.GetString(row, r_.column(name)); }
  std::optional<int32_t> OptionalInt(int row, const char* name) const {
    return GetOptionalInt32(r_, row, r_.column(name));
  }

 private:
  const PgResult& r_;
};

// Where a result has the columns of sql::kTrialColumns (db/sql/trial_columns.sql),
// by name: looked up once per result, then read in every row.
struct TrialColumns {
  int id, sweep_id, trial_index, config, variant, state, attempts, worker_id, lease_expires_us, last_step,
      last_train_loss, last_val_loss, final_val_loss, best_val_loss, final_train_loss, final_val_accuracy,
      diverged_step, tokens_per_s, error, init_val_loss, created_us, started_us, finished_us, update_seq;

  int boundary_line;  // NULL but in boundary_search sweeps

  static absl::StatusOr<TrialColumns> Of(const PgResult& r);
};

absl::StatusOr<v1::Trial> ParseTrial(const PgResult& r, const TrialColumns& c, int row);
absl::StatusOr<std::vector<v1::Trial>> ParseTrials(const PgResult& r);
// Row 0 of a result with the trial columns.
absl::StatusOr<v1::Trial> ParseFirstTrial(const PgResult& r);

// A sweep's columns (sweeps s), in the order ParseSweeps reads them.
inline constexpr char kSweepColumns[] =
    "s.id, s.request_id, s.name, s.spec::text, s.state, s.trial_count, " NS_MICROS("s.created_at")
    ", " NS_MICROS("s.finished_at");

// Rows of kSweepColumns; counts are left to the caller.
absl::StatusOr<std::vector<v1::Sweep>> ParseSweeps(const PgResult& r);

}  // namespace normsweep::db

#endif  // NORMSWEEP_DB_PG_ROWS_H_

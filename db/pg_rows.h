// Reading query results into the API's messages, for PostgresStore
// (db/postgres_store.cc, db/postgres_hot_path.cc) and the analysis views
// (db/sweep_analysis.cc): one set of column readers (GetInt32,
// GetOptionalInt32, ColumnOf; AppendRows for a result whose columns are
// named after a message's fields) and the parsers of a trial's and a sweep's
// row. A db-internal header: it speaks PgResult.
#ifndef NORMSWEEP_DB_PG_ROWS_H_
#define NORMSWEEP_DB_PG_ROWS_H_

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "db/pg_connection.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/repeated_ptr_field.h"
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

// A message's field and the column it is read from.
struct FieldColumn {
  const google::protobuf::FieldDescriptor* field;
  int column;
};
// {field, column} for a field whose column has another name.
using FieldRenames = std::initializer_list<std::pair<const char*, const char*>>;
// The fields of `type` that r has a column for; INTERNAL for one that
// ReadRow cannot read (repeated, a message, an enum).
absl::StatusOr<std::vector<FieldColumn>> FieldColumns(const PgResult& r, const google::protobuf::Descriptor& type,
                                                      FieldRenames renames);
// Sets each field from its column by the field's type; NULL leaves it unset.
void ReadRow(const PgResult& r, int row, const std::vector<FieldColumn>& columns, google::protobuf::Message& into);

// Appends a message per row of r, each column read into the field of M
// that has its name. For the analysis views, whose columns are named after
// the response's fields (db/sweep_analysis.cc): columns looked up once per
// result, then read in every row.
template <typename M>
absl::Status AppendRows(const PgResult& r, google::protobuf::RepeatedPtrField<M>& out, FieldRenames renames = {}) {
  absl::StatusOr<std::vector<FieldColumn>> columns = FieldColumns(r, *M::descriptor(), renames);
  if (!columns.ok()) return columns.status();
  for (int row = 0; row < r.rows(); ++row) ReadRow(r, row, *columns, *out.Add());
  return absl::OkStatus();
}

// Where a result has the columns of sql::kTrialColumns (db/sql/trial_columns.sql),
// by name: looked up once per result, then read in every row.
struct TrialColumns {
  int id, sweep_id, trial_index, config, variant, state, attempts, worker_id, lease_expires_us, last_step,
      last_train_loss, last_val_loss, final_val_loss, best_val_loss, final_train_loss, final_val_accuracy,
      diverged_step, tokens_per_s, error, init_val_loss, created_us, started_us, finished_us, update_seq,
      interruptions, unigram_loss, val_loss_progress;

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
    ", " NS_MICROS("s.finished_at") ", s.max_interruptions, s.submitted_by, s.cancelled_by";

// Rows of kSweepColumns; counts are left to the caller.
absl::StatusOr<std::vector<v1::Sweep>> ParseSweeps(const PgResult& r);

}  // namespace normsweep::db

#endif  // NORMSWEEP_DB_PG_ROWS_H_

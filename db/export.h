// ExportSweep's store-independent half (SweepService.ExportSweep, proto
// comment in sweep_service.proto): the request checked into a plan, the
// tables' columns (from the proto descriptors, so that a new field becomes a
// column by itself), chunks of at most about max_chunk_bytes, the cursor and
// the follow loop. Each store adds only the reading of rows in key order:
// MemoryStore from its maps (db/memory_export.cc), PostgresStore with a
// server-side cursor on a connection of its own (db/pg_export.cc).
//
// The cursor. Every exported row has a key (x, trial_id, step, layer,
// matrix; the matrix only in grad_norms, "" elsewhere): x is
// when the row was last written, in the store's own order (PostgreSQL: the
// id of the transaction that wrote it; MemoryStore: its store-wide
// sequence), the rest break ties. A pass exports, in key order, the rows
// whose key is above the `since` cursor and whose x is below a horizon, the
// smallest x that may still be written (PostgreSQL: the oldest transaction
// still running, pg_snapshot_xmin): rows below it are all there and can no
// longer appear, so a client that continues from a chunk's cursor gets no
// row twice and none missing, whatever order the writers commit in. A row
// written again (a trial that changed, a step whose evaluation came later)
// gets a new x and is exported again, with its newest values; a client keeps
// the last row of each (trial_id, step, layer, matrix).
#ifndef NORMSWEEP_DB_EXPORT_H_
#define NORMSWEEP_DB_EXPORT_H_

#include <compare>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "normsweep/v1/sweep.pb.h"
#include "normsweep/v1/sweep_service.pb.h"

namespace normsweep::db {

// The most metric columns a MetricPoint may have (its fields but step).
inline constexpr size_t kMaxMetricColumns = 16;

enum class ExportTable { kTrials, kMetrics, kGradNorms, kDiagnostics, kAttempts };

// A row's place in the export order (see above). Rows without a step or
// layer hold 0 there (attempts: the attempt number in step). grad_norms'
// rows of one layer differ only in their matrix, which breaks the tie in
// byte order (PostgreSQL: COLLATE "C"); an empty matrix sorts first.
struct ExportKey {
  int64_t x = 0;
  int64_t trial_id = 0;
  int32_t step = 0;
  int32_t layer = 0;
  std::string matrix = {};
  auto operator<=>(const ExportKey&) const = default;
};

struct ExportColumnSpec {
  std::string name;
  v1::ExportColumnType type;
};

// A checked request.
struct ExportPlan {
  int64_t sweep_id = 0;
  ExportTable table = ExportTable::kTrials;
  std::string table_name;
  std::vector<ExportColumnSpec> columns;
  // metrics: the MetricPoint field numbers of the columns after trial_id and step.
  std::vector<int> metric_fields;
  ExportKey since;
  bool follow = false;
};

// INVALID_ARGUMENT naming the field and quoting the bad value: table, an
// unknown metrics[i], a since cursor that is malformed or from another sweep
// or table. (An unknown sweep is the store's NOT_FOUND.)
absl::StatusOr<ExportPlan> PlanExport(const v1::ExportSweepRequest& request);

// The columns of a table (every metric for metrics).
std::vector<ExportColumnSpec> ExportColumns(ExportTable table);

// "sweep.table.x.trial_id.step.layer", then ".matrix" when the key has one
// (a matrix name may hold dots: it is the rest of the cursor).
std::string EncodeExportCursor(int64_t sweep_id, const std::string& table, const ExportKey& key);

struct ExportOptions {
  // A chunk is sent once the next row would take it above this many bytes
  // serialized (a single larger row still goes, alone).
  size_t max_chunk_bytes = 1000 * 1000;
  // Rows read from the database at a time (PostgresStore's FETCH).
  int fetch_rows = 2000;
  // follow: how often a store is read again for new rows.
  absl::Duration follow_poll = absl::Milliseconds(250);
};

struct ExportCallbacks {
  // Sends a chunk; false when the client is gone (the export stops).
  std::function<bool(const v1::ExportChunk&)> send;
  // True once the client is gone: polled between reads (and, by
  // PostgresStore, during a slow one, which it then cancels).
  std::function<bool()> cancelled;
};

// Builds the chunks of one export; each store's pass adds its rows in key
// order. Not thread-safe (one export, one thread).
class ExportChunkBuilder {
 public:
  ExportChunkBuilder(const ExportPlan& plan, const ExportOptions& options, const ExportCallbacks& callbacks);

  // Each appends one row; false when a full chunk could not be sent (the
  // client is gone): the pass stops.
  bool AddTrial(const ExportKey& key, const v1::Trial& trial);
  bool AddMetric(const ExportKey& key, const v1::MetricPoint& point);  // key: trial_id, step
  // The same row from its values, in plan.metric_fields' order, absent[i]
  // marking those that are absent (PostgresStore's path: no message).
  bool AddMetricValues(const ExportKey& key, const double* values, const bool* absent);
  // One matrix's norm; key: trial_id, step, layer, matrix (as stored: "ffn.fc1").
  bool AddGradNorm(const ExportKey& key, double norm);
  bool AddDiagnostics(const ExportKey& key, const v1::LayerDiagnostics& layer);
  bool AddAttempt(const ExportKey& key, const v1::TrialAttempt& attempt);

  // Sends what is held, with this cursor; an empty chunk only when it is
  // the stream's first or last.
  bool Flush(const ExportKey& cursor, bool last);

 private:
  struct Value {
    bool absent = false;
    double d = 0;
    int64_t i = 0;
    std::string s;
  };
  bool AddRow(const ExportKey& key, std::vector<Value>& row);
  static void Put(const google::protobuf::Message& m, const google::protobuf::FieldDescriptor& f, Value& v);
  void Reset();

  const ExportPlan& plan_;
  const ExportOptions& options_;
  const ExportCallbacks& callbacks_;
  v1::ExportChunk chunk_;
  size_t bytes_ = 0;          // an upper bound of chunk_'s serialized size
  ExportKey last_key_;        // of the last row added
  bool sent_any_ = false;
  std::vector<Value> row_;    // reused
};

// What one pass over a store found.
struct ExportPassResult {
  // Every row below this key has been added (the horizon, or above).
  ExportKey end;
  // The sweep was final before the pass and no write of it can still come.
  bool complete = false;
};

// The pass of a store: adds the rows above `since` and below its horizon.
using ExportPass = std::function<absl::StatusOr<ExportPassResult>(const ExportKey& since, ExportChunkBuilder& out)>;

// The export: one pass, or (follow) passes every follow_poll until the sweep
// is complete; then a last chunk. CANCELLED when the client went away.
absl::Status RunExport(const ExportPlan& plan, const ExportOptions& options, const ExportCallbacks& callbacks,
                       const ExportPass& pass);

}  // namespace normsweep::db

#endif  // NORMSWEEP_DB_EXPORT_H_

// ExportSweep's columnar chunks back into the messages GetTrial returns, so
// that `normsweep report` reads a whole sweep in a few streams instead of
// one GetTrial per trial.
//
// Columns are matched to proto fields by their names (the names ExportSweep
// gives them, db/export.cc) through the descriptors: a field added to Trial,
// TrainConfig, TrialResult, MetricPoint or LayerDiagnostics flows through
// without a change here, and a column this client does not know (a newer
// scheduler's) is skipped. The tables:
//   trials       trial_id -> Trial.id, trial_index -> Trial.index, peak_lr
//                -> TrainConfig.lr (so does the deprecated column lr, the
//                same values), then each name in Trial, else TrainConfig,
//                else TrialResult (the n-th column of a name takes the n-th
//                of these that has it)
//   metrics      trial_id, then MetricPoint's fields (step among them); a
//                row with no value but its step is not kept: it draws
//                nothing, and most steps of a sweep exported for a few
//                fields (val_loss at evaluations) are such rows. It never
//                stands for a value gone: the store keeps the first value
//                of each field of a step (MetricPoint), so a row sent
//                again has at least the values of the one before
//   grad_norms   trial_id, step, layer, matrix, norm: one LayerGradNorm a
//                row, the stored shape (the only columns named by hand; an
//                absent norm leaves no LayerGradNorm)
//   diagnostics  trial_id, step -> StepDiagnostics.step, then
//                LayerDiagnostics' fields (layer among them)
// An absent value leaves its field unset.
//
// The export sends a row again when it was written again (db/export.h); the
// last row of each key wins, whatever order the rows came in (trials:
// trial_id; metrics: trial_id, step; grad_norms: trial_id, step, layer,
// matrix; diagnostics: trial_id, step, layer). The trials' lists come out in GetTrial's order (db/
// postgres_store.cc, GetTrialHistory): metrics by step; gradient norms by
// step, then layer and matrix; diagnostics by step, then layer.
//
// Not thread-safe: one caller feeds it the chunks of one export at a time.
#ifndef NORMSWEEP_CLIENT_REPORT_EXPORT_READER_H_
#define NORMSWEEP_CLIENT_REPORT_EXPORT_READER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/status/status.h"
#include "normsweep/v1/sweep_service.pb.h"

namespace normsweep::client {

class ExportReader {
 public:
  // sweep_id: the export's sweep (each Trial's sweep_id; the trials table
  // has no column for it).
  explicit ExportReader(int64_t sweep_id) : sweep_id_(sweep_id) {}

  // One chunk of ExportSweep's table `table`: "trials", "metrics",
  // "grad_norms" or "diagnostics". INVALID_ARGUMENT for another table;
  // INTERNAL for a chunk this client cannot read (a key column missing or
  // absent, a column whose type does not fit its field, fewer values than
  // rows, an unknown enum value), naming the table and column. A chunk
  // that fails adds nothing.
  absl::Status Add(const std::string& table, const v1::ExportChunk& chunk);

  // From now on only these trials' diagnostics rows are kept (the page
  // draws the diagnostics of a few trials).
  void KeepDiagnosticsOf(std::unordered_set<int64_t> trial_ids) { keep_diagnostics_ = std::move(trial_ids); }

  // The trials of the trials table by index, each with its rows of the
  // other tables read (TakeRowsInto). Rows whose trial has no trials row
  // are dropped. Fields the export does not carry stay unset: Trial's
  // lease_expires_at, last_step, last_train_loss, last_val_loss and
  // boundary_line, and GetTrialResponse.attempts. Leaves the reader empty.
  std::vector<v1::GetTrialResponse> TakeTrials();

  // For each table of metrics, grad_norms and diagnostics that was read,
  // replaces each of `trials`' list of it with the rows read for that trial
  // (none when it had none, or when KeepDiagnosticsOf left it out). Lists
  // of tables not read stay as they are. Leaves the reader's rows empty.
  void TakeRowsInto(std::vector<v1::GetTrialResponse>& trials);

 private:
  // One grad_norms row.
  struct GradRow {
    int32_t step = 0, layer = 0;
    std::string matrix;  // as stored: "ffn.fc1", "ffn.fc2"
    std::optional<double> norm;
  };
  // What was read of one trial. Row messages are heap-allocated by their
  // RepeatedPtrField, so pointers to them survive later rows.
  struct Entry {
    bool has_trial = false;
    v1::Trial trial;
    int last_row = -1;  // trials: its last row in the chunk being read
    google::protobuf::RepeatedPtrField<v1::MetricPoint> metrics;  // in arrival order
    std::vector<GradRow> grad_rows;                               // in arrival order
    // One layer each, in arrival order; grouped by step in TakeRowsInto.
    google::protobuf::RepeatedPtrField<v1::StepDiagnostics> diagnostics;
  };

  absl::Status AddTrials(const v1::ExportChunk& chunk);
  absl::Status AddMetrics(const v1::ExportChunk& chunk);
  absl::Status AddGradNorms(const v1::ExportChunk& chunk);
  absl::Status AddDiagnostics(const v1::ExportChunk& chunk);
  // The entry of a trial; the previous row's when it is the same trial
  // (rows come grouped by trial).
  Entry& EntryOf(int64_t trial_id);

  int64_t sweep_id_;
  std::unordered_map<int64_t, Entry> entries_;  // node-based: Entry pointers stay valid
  int64_t cached_id_ = 0;
  Entry* cached_ = nullptr;
  bool read_metrics_ = false, read_grad_norms_ = false, read_diagnostics_ = false;
  std::optional<std::unordered_set<int64_t>> keep_diagnostics_;
};

}  // namespace normsweep::client

#endif  // NORMSWEEP_CLIENT_REPORT_EXPORT_READER_H_

#include "db/export.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "common/quote.h"
#include "common/status_macros.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/timestamp.pb.h"

namespace normsweep::db {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

constexpr const char* kTableNames[] = {"trials", "metrics", "grad_norms", "diagnostics", "attempts"};

std::optional<v1::ExportColumnType> TypeOf(const FieldDescriptor& f) {
  if (f.is_repeated()) return std::nullopt;
  switch (f.cpp_type()) {
    case FieldDescriptor::CPPTYPE_DOUBLE: return v1::EXPORT_COLUMN_DOUBLE;
    case FieldDescriptor::CPPTYPE_FLOAT: return v1::EXPORT_COLUMN_FLOAT;
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64: return v1::EXPORT_COLUMN_INT64;
    case FieldDescriptor::CPPTYPE_BOOL: return v1::EXPORT_COLUMN_BOOL;
    case FieldDescriptor::CPPTYPE_STRING:
    case FieldDescriptor::CPPTYPE_ENUM: return v1::EXPORT_COLUMN_STRING;
    case FieldDescriptor::CPPTYPE_MESSAGE:
      if (f.message_type() == google::protobuf::Timestamp::descriptor()) return v1::EXPORT_COLUMN_TIMESTAMP;
      return std::nullopt;
  }
  return std::nullopt;
}

// The scalar (and Timestamp) fields of a message that become columns, in
// field order, leaving out those named in skip.
std::vector<const FieldDescriptor*> ColumnFields(const Descriptor& d, std::vector<std::string> skip = {}) {
  std::vector<const FieldDescriptor*> out;
  for (int i = 0; i < d.field_count(); ++i) {
    const FieldDescriptor* f = d.field(i);
    if (std::find(skip.begin(), skip.end(), f->name()) != skip.end() || !TypeOf(*f)) continue;
    out.push_back(f);
  }
  return out;
}

const std::vector<const FieldDescriptor*>& ConfigFields() {
  static const auto* fields = new std::vector<const FieldDescriptor*>(ColumnFields(*v1::TrainConfig::descriptor()));
  return *fields;
}
// TrainConfig.lr is the peak lr: its column is named peak_lr, as the sweep's
// axis and the analysis name it. The column `lr` (deprecated, kept one
// release) repeats it after every other column, so that those before it keep
// their places.
constexpr char kConfigLrField[] = "lr";
constexpr char kPeakLrColumn[] = "peak_lr";
const FieldDescriptor& ConfigLrField() { return *v1::TrainConfig::descriptor()->FindFieldByName(kConfigLrField); }
const std::vector<const FieldDescriptor*>& ResultFields() {
  static const auto* fields = new std::vector<const FieldDescriptor*>(ColumnFields(*v1::TrialResult::descriptor()));
  return *fields;
}
// Every one a double, at most kMaxMetricColumns of them (the rows of
// ExportChunkBuilder::AddMetricValues; PlanExport checks).
const std::vector<const FieldDescriptor*>& MetricFields() {
  static const auto* fields =
      new std::vector<const FieldDescriptor*>(ColumnFields(*v1::MetricPoint::descriptor(), {"step"}));
  return *fields;
}
// Whether MetricFields() are what AddMetricValues takes, checked once.
const absl::Status& MetricFieldsShape() {
  static const auto* status = [] {
    if (MetricFields().size() > kMaxMetricColumns) {
      return new absl::Status(
          absl::InternalError("ExportSweep: MetricPoint has more fields than kMaxMetricColumns (db/export.h)"));
    }
    for (const FieldDescriptor* f : MetricFields()) {
      if (f->cpp_type() != FieldDescriptor::CPPTYPE_DOUBLE) {
        return new absl::Status(absl::InternalError(absl::StrCat("ExportSweep: MetricPoint.", f->name(), " is no double")));
      }
    }
    return new absl::Status();
  }();
  return *status;
}
const std::vector<const FieldDescriptor*>& DiagnosticFields() {
  static const auto* fields =
      new std::vector<const FieldDescriptor*>(ColumnFields(*v1::LayerDiagnostics::descriptor(), {"layer"}));
  return *fields;
}
const std::vector<const FieldDescriptor*>& AttemptFields() {
  static const auto* fields = new std::vector<const FieldDescriptor*>(ColumnFields(*v1::TrialAttempt::descriptor()));
  return *fields;
}

void AddColumns(const std::vector<const FieldDescriptor*>& fields, std::vector<ExportColumnSpec>& out) {
  for (const FieldDescriptor* f : fields) out.push_back({f->name(), *TypeOf(*f)});
}

absl::Status BadCursor(const std::string& since, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("since: ", why, ": ", QuoteForError(since)));
}

}  // namespace

std::vector<ExportColumnSpec> ExportColumns(ExportTable table) {
  using v1::EXPORT_COLUMN_DOUBLE;
  using v1::EXPORT_COLUMN_INT64;
  using v1::EXPORT_COLUMN_STRING;
  using v1::EXPORT_COLUMN_TIMESTAMP;
  std::vector<ExportColumnSpec> c = {{"trial_id", EXPORT_COLUMN_INT64}};
  switch (table) {
    case ExportTable::kTrials:
      c.insert(c.end(), {{"trial_index", EXPORT_COLUMN_INT64}, {"variant", EXPORT_COLUMN_STRING},
                         {"state", EXPORT_COLUMN_STRING}, {"attempts", EXPORT_COLUMN_INT64},
                         {"interruptions", EXPORT_COLUMN_INT64}, {"worker_id", EXPORT_COLUMN_INT64},
                         {"created_at", EXPORT_COLUMN_TIMESTAMP}, {"started_at", EXPORT_COLUMN_TIMESTAMP},
                         {"finished_at", EXPORT_COLUMN_TIMESTAMP}});
      AddColumns(ConfigFields(), c);
      for (ExportColumnSpec& column : c) {
        if (column.name == kConfigLrField) column.name = kPeakLrColumn;
      }
      AddColumns(ResultFields(), c);
      AddColumns({&ConfigLrField()}, c);  // deprecated: peak_lr
      break;
    case ExportTable::kMetrics:
      c.push_back({"step", EXPORT_COLUMN_INT64});
      AddColumns(MetricFields(), c);
      break;
    case ExportTable::kGradNorms:
      c.insert(c.end(), {{"step", EXPORT_COLUMN_INT64}, {"layer", EXPORT_COLUMN_INT64},
                         {"matrix", EXPORT_COLUMN_STRING}, {"norm", EXPORT_COLUMN_DOUBLE}});
      break;
    case ExportTable::kDiagnostics:
      c.insert(c.end(), {{"step", EXPORT_COLUMN_INT64}, {"layer", EXPORT_COLUMN_INT64}});
      AddColumns(DiagnosticFields(), c);
      break;
    case ExportTable::kAttempts:
      AddColumns(AttemptFields(), c);
      break;
  }
  return c;
}

std::string EncodeExportCursor(int64_t sweep_id, const std::string& table, const ExportKey& key) {
  return absl::StrCat(sweep_id, ".", table, ".", key.x, ".", key.trial_id, ".", key.step, ".", key.layer,
                      key.matrix.empty() ? "" : ".", key.matrix);
}

absl::StatusOr<ExportPlan> PlanExport(const v1::ExportSweepRequest& request) {
  ExportPlan plan;
  plan.sweep_id = request.sweep_id();
  plan.follow = request.follow();
  const auto* name = std::find(std::begin(kTableNames), std::end(kTableNames), request.table());
  if (name == std::end(kTableNames)) {
    return absl::InvalidArgumentError(absl::StrCat("table: unknown table ", QuoteForError(request.table()),
                                                   "; valid: ", absl::StrJoin(kTableNames, ", ")));
  }
  plan.table = static_cast<ExportTable>(name - std::begin(kTableNames));
  plan.table_name = request.table();
  if (request.metrics_size() > 0 && plan.table != ExportTable::kMetrics) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics: only for table 'metrics', not ", QuoteForError(request.table())));
  }
  plan.columns = ExportColumns(plan.table);
  if (plan.table == ExportTable::kMetrics) {
    if (const absl::Status& shape = MetricFieldsShape(); !shape.ok()) return shape;
    std::vector<std::string> valid;
    for (const FieldDescriptor* f : MetricFields()) valid.push_back(f->name());
    std::vector<const FieldDescriptor*> wanted;
    for (int i = 0; i < request.metrics_size(); ++i) {
      const std::string& m = request.metrics(i);
      auto it = std::find(valid.begin(), valid.end(), m);
      if (it == valid.end()) {
        return absl::InvalidArgumentError(absl::StrCat("metrics[", i, "]: unknown metric ", QuoteForError(m),
                                                       "; valid: ", absl::StrJoin(valid, ", ")));
      }
      const FieldDescriptor* f = MetricFields()[it - valid.begin()];
      if (std::find(wanted.begin(), wanted.end(), f) != wanted.end()) {
        return absl::InvalidArgumentError(absl::StrCat("metrics[", i, "]: ", QuoteForError(m), " given twice"));
      }
      wanted.push_back(f);
    }
    if (wanted.empty()) wanted = MetricFields();
    plan.columns.resize(2);  // trial_id, step
    AddColumns(wanted, plan.columns);
    for (const FieldDescriptor* f : wanted) plan.metric_fields.push_back(f->number());
  }
  if (!request.since().empty()) {
    // The seventh part, a matrix name, is the rest of the cursor (it may hold dots).
    const std::vector<std::string> parts = absl::StrSplit(request.since(), absl::MaxSplits('.', 6));
    int64_t sweep = 0;
    ExportKey k;
    if (parts.size() < 6 || !absl::SimpleAtoi(parts[0], &sweep) || !absl::SimpleAtoi(parts[2], &k.x) ||
        !absl::SimpleAtoi(parts[3], &k.trial_id) || !absl::SimpleAtoi(parts[4], &k.step) ||
        !absl::SimpleAtoi(parts[5], &k.layer) || (parts.size() == 7 && parts[6].empty())) {
      return BadCursor(request.since(), "not a cursor of ExportSweep");
    }
    if (sweep != plan.sweep_id) return BadCursor(request.since(), absl::StrCat("a cursor of sweep ", sweep));
    if (parts[1] != plan.table_name) return BadCursor(request.since(), absl::StrCat("a cursor of table ", parts[1]));
    if (parts.size() == 7) {
      if (plan.table != ExportTable::kGradNorms) {
        return BadCursor(request.since(), "not a cursor of ExportSweep (a matrix in a cursor of " +
                                              plan.table_name + ")");
      }
      k.matrix = parts[6];
    }
    plan.since = k;
  }
  return plan;
}

ExportChunkBuilder::ExportChunkBuilder(const ExportPlan& plan, const ExportOptions& options,
                                       const ExportCallbacks& callbacks)
    : plan_(plan), options_(options), callbacks_(callbacks) {
  Reset();
}

void ExportChunkBuilder::Reset() {
  chunk_.Clear();
  bytes_ = 128;  // rows, cursor, last
  for (const ExportColumnSpec& spec : plan_.columns) {
    v1::ExportColumn* c = chunk_.add_columns();
    c->set_name(spec.name);
    c->set_type(spec.type);
    bytes_ += spec.name.size() + 32;  // name, type, the packed arrays' lengths
  }
}

bool ExportChunkBuilder::AddRow(const ExportKey& key, std::vector<Value>& row) {
  size_t row_bytes = 0;
  for (size_t i = 0; i < row.size(); ++i) {
    row_bytes += 1;  // its absent flag, when the column has them
    switch (plan_.columns[i].type) {
      case v1::EXPORT_COLUMN_DOUBLE:
      case v1::EXPORT_COLUMN_FLOAT: row_bytes += 8; break;
      case v1::EXPORT_COLUMN_STRING: row_bytes += 6 + row[i].s.size(); break;
      default: row_bytes += 10; break;  // a varint
    }
  }
  if (chunk_.rows() > 0 && bytes_ + row_bytes > options_.max_chunk_bytes && !Flush(last_key_, false)) return false;
  for (size_t i = 0; i < row.size(); ++i) {
    v1::ExportColumn* c = chunk_.mutable_columns(static_cast<int>(i));
    Value& v = row[i];
    if (v.absent || c->absent_size() > 0) {  // the flags start with the column's first absent value
      if (c->absent_size() < chunk_.rows()) c->mutable_absent()->Resize(chunk_.rows(), false);
      c->add_absent(v.absent);
    }
    switch (plan_.columns[i].type) {
      case v1::EXPORT_COLUMN_DOUBLE:
      case v1::EXPORT_COLUMN_FLOAT: c->add_doubles(v.absent ? 0 : v.d); break;
      case v1::EXPORT_COLUMN_STRING: c->add_strings(v.absent ? std::string() : std::move(v.s)); break;
      default: c->add_ints(v.absent ? 0 : v.i); break;
    }
  }
  chunk_.set_rows(chunk_.rows() + 1);
  bytes_ += row_bytes;
  last_key_ = key;
  return true;
}

bool ExportChunkBuilder::Flush(const ExportKey& cursor, bool last) {
  // Empty chunks only as the first (the columns, and a cursor to resume
  // from, at once) and the last.
  if (chunk_.rows() == 0 && !last && sent_any_) return true;
  sent_any_ = true;
  chunk_.set_cursor(EncodeExportCursor(plan_.sweep_id, plan_.table_name, cursor));
  chunk_.set_last(last);
  const bool sent = callbacks_.send(chunk_);
  Reset();
  return sent;
}

namespace {

// One field of a message as a column value.
void FieldValue(const Message& m, const FieldDescriptor& f, bool& absent, double& d, int64_t& i, std::string& s) {
  const auto* r = m.GetReflection();
  absent = f.has_presence() && !r->HasField(m, &f);
  if (absent) return;
  switch (f.cpp_type()) {
    case FieldDescriptor::CPPTYPE_DOUBLE: d = r->GetDouble(m, &f); break;
    case FieldDescriptor::CPPTYPE_FLOAT: d = r->GetFloat(m, &f); break;
    case FieldDescriptor::CPPTYPE_INT32: i = r->GetInt32(m, &f); break;
    case FieldDescriptor::CPPTYPE_INT64: i = r->GetInt64(m, &f); break;
    case FieldDescriptor::CPPTYPE_UINT32: i = r->GetUInt32(m, &f); break;
    case FieldDescriptor::CPPTYPE_UINT64: i = static_cast<int64_t>(r->GetUInt64(m, &f)); break;
    case FieldDescriptor::CPPTYPE_BOOL: i = r->GetBool(m, &f) ? 1 : 0; break;
    case FieldDescriptor::CPPTYPE_STRING: s = r->GetString(m, &f); break;
    case FieldDescriptor::CPPTYPE_ENUM: s = r->GetEnum(m, &f)->name(); break;
    case FieldDescriptor::CPPTYPE_MESSAGE: {
      const auto& t = static_cast<const google::protobuf::Timestamp&>(r->GetMessage(m, &f));
      i = t.seconds() * 1000000 + t.nanos() / 1000;
      break;
    }
  }
}

}  // namespace

void ExportChunkBuilder::Put(const google::protobuf::Message& m, const google::protobuf::FieldDescriptor& f,
                             Value& v) {
  FieldValue(m, f, v.absent, v.d, v.i, v.s);
}

bool ExportChunkBuilder::AddTrial(const ExportKey& key, const v1::Trial& t) {
  row_.assign(plan_.columns.size(), Value());
  size_t n = 0;
  auto put_int = [&](int64_t v) { row_[n++].i = v; };
  auto put_time = [&](bool has, const google::protobuf::Timestamp& ts) {
    row_[n].absent = !has;
    row_[n++].i = ts.seconds() * 1000000 + ts.nanos() / 1000;
  };
  put_int(t.id());
  put_int(t.index());
  row_[n++].s = t.variant();
  row_[n++].s = v1::TrialState_Name(t.state());
  put_int(t.attempts());
  put_int(t.interruptions());
  row_[n].absent = t.worker_id() == 0;
  put_int(t.worker_id());
  put_time(t.has_created_at(), t.created_at());
  put_time(t.has_started_at(), t.started_at());
  put_time(t.has_finished_at(), t.finished_at());
  for (const FieldDescriptor* f : ConfigFields()) Put(t.config(), *f, row_[n++]);
  for (const FieldDescriptor* f : ResultFields()) Put(t.result(), *f, row_[n++]);
  Put(t.config(), ConfigLrField(), row_[n++]);  // lr, deprecated: peak_lr
  return AddRow(key, row_);
}

bool ExportChunkBuilder::AddMetric(const ExportKey& key, const v1::MetricPoint& point) {
  const size_t n = plan_.metric_fields.size();
  double values[kMaxMetricColumns];
  bool absent[kMaxMetricColumns];
  for (size_t i = 0; i < n; ++i) {
    const FieldDescriptor* f = v1::MetricPoint::descriptor()->FindFieldByNumber(plan_.metric_fields[i]);
    absent[i] = !point.GetReflection()->HasField(point, f);
    values[i] = absent[i] ? 0 : point.GetReflection()->GetDouble(point, f);
  }
  return AddMetricValues(key, values, absent);
}

bool ExportChunkBuilder::AddMetricValues(const ExportKey& key, const double* values, const bool* absent) {
  // As AddRow counts: trial_id and step a varint each, a double and an
  // absent flag per metric.
  const size_t n = plan_.metric_fields.size();
  const size_t row_bytes = 2 * 11 + n * 9;
  if (chunk_.rows() > 0 && bytes_ + row_bytes > options_.max_chunk_bytes && !Flush(last_key_, false)) return false;
  const int rows = chunk_.rows();
  chunk_.mutable_columns(0)->add_ints(key.trial_id);
  chunk_.mutable_columns(1)->add_ints(key.step);
  for (size_t i = 0; i < n; ++i) {
    v1::ExportColumn* c = chunk_.mutable_columns(static_cast<int>(i + 2));
    if (absent[i] || c->absent_size() > 0) {  // the flags start with the column's first absent value
      if (c->absent_size() < rows) c->mutable_absent()->Resize(rows, false);
      c->add_absent(absent[i]);
    }
    c->add_doubles(absent[i] ? 0 : values[i]);
  }
  chunk_.set_rows(rows + 1);
  bytes_ += row_bytes;
  last_key_ = key;
  return true;
}

bool ExportChunkBuilder::AddGradNorm(const ExportKey& key, double norm) {
  row_.assign(plan_.columns.size(), Value());
  row_[0].i = key.trial_id;
  row_[1].i = key.step;
  row_[2].i = key.layer;
  row_[3].s = key.matrix;
  row_[4].d = norm;
  return AddRow(key, row_);
}

bool ExportChunkBuilder::AddDiagnostics(const ExportKey& key, const v1::LayerDiagnostics& layer) {
  row_.assign(plan_.columns.size(), Value());
  row_[0].i = key.trial_id;
  row_[1].i = key.step;
  row_[2].i = key.layer;
  size_t n = 3;
  for (const FieldDescriptor* f : DiagnosticFields()) Put(layer, *f, row_[n++]);
  return AddRow(key, row_);
}

bool ExportChunkBuilder::AddAttempt(const ExportKey& key, const v1::TrialAttempt& attempt) {
  row_.assign(plan_.columns.size(), Value());
  row_[0].i = key.trial_id;
  size_t n = 1;
  for (const FieldDescriptor* f : AttemptFields()) Put(attempt, *f, row_[n++]);
  return AddRow(key, row_);
}

absl::Status RunExport(const ExportPlan& plan, const ExportOptions& options, const ExportCallbacks& callbacks,
                       const ExportPass& pass) {
  const absl::Status gone = absl::CancelledError("ExportSweep: the client went away");
  ExportChunkBuilder out(plan, options, callbacks);
  ExportKey since = plan.since;
  while (true) {
    if (callbacks.cancelled()) return gone;
    const absl::Time pass_start = absl::Now();
    ASSIGN_OR_RETURN(ExportPassResult pass_result, pass(since, out));
    const absl::Duration pass_time = absl::Now() - pass_start;
    since = std::max(since, pass_result.end);
    const bool last = !plan.follow || pass_result.complete;
    if (!out.Flush(since, last)) return gone;
    if (last) return absl::OkStatus();
    // Wait for new rows, watching for the client to go. A pass re-reads the
    // sweep's rows (no index on the write xid): on a large sweep, waiting
    // twice as long as it took keeps a follower to a third of a database core.
    const absl::Time until = absl::Now() + std::max(options.follow_poll, 2 * pass_time);
    while (absl::Now() < until) {
      if (callbacks.cancelled()) return gone;
      absl::SleepFor(std::min(options.follow_poll, absl::Milliseconds(50)));
    }
  }
}

}  // namespace normsweep::db

#include "client/report/export_reader.h"

#include <algorithm>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/quote.h"
#include "common/status_macros.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/timestamp.pb.h"

namespace normsweep::client {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using google::protobuf::RepeatedPtrField;

// Where a column goes: a field of the row's target message (an index into
// the table's targets); no field: the column is not read (or read by hand).
struct Binding {
  int target = 0;
  const FieldDescriptor* field = nullptr;
};

// A column named otherwise than its field.
struct Alias {
  const char* column;
  int target;
  const char* field;
};

absl::Status Unreadable(const std::string& table, const std::string& column, const std::string& why) {
  return absl::InternalError(
      absl::StrCat("ExportSweep table ", table, ", column ", QuoteForError(column), ": ", why));
}

// Scalars, enums and Timestamps: what db/export.cc makes columns of.
bool Bindable(const FieldDescriptor& f) {
  if (f.is_repeated()) return false;
  return f.cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE ||
         f.message_type() == google::protobuf::Timestamp::descriptor();
}

bool Fits(v1::ExportColumnType type, const FieldDescriptor& f) {
  switch (f.cpp_type()) {
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT: return type == v1::EXPORT_COLUMN_DOUBLE || type == v1::EXPORT_COLUMN_FLOAT;
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64: return type == v1::EXPORT_COLUMN_INT64;
    case FieldDescriptor::CPPTYPE_BOOL: return type == v1::EXPORT_COLUMN_BOOL || type == v1::EXPORT_COLUMN_INT64;
    case FieldDescriptor::CPPTYPE_STRING:
    case FieldDescriptor::CPPTYPE_ENUM: return type == v1::EXPORT_COLUMN_STRING;
    case FieldDescriptor::CPPTYPE_MESSAGE: return type == v1::EXPORT_COLUMN_TIMESTAMP;
  }
  return false;
}

// How many values a column holds in the array its type names.
int ValueCount(const v1::ExportColumn& c) {
  switch (c.type()) {
    case v1::EXPORT_COLUMN_DOUBLE:
    case v1::EXPORT_COLUMN_FLOAT: return c.doubles_size();
    case v1::EXPORT_COLUMN_STRING: return c.strings_size();
    default: return c.ints_size();
  }
}

absl::Status CheckLength(const std::string& table, const v1::ExportChunk& chunk, const v1::ExportColumn& c) {
  if (ValueCount(c) != chunk.rows()) {
    return Unreadable(table, c.name(), absl::StrCat(ValueCount(c), " values in a chunk of ", chunk.rows(), " rows"));
  }
  if (c.absent_size() != 0 && c.absent_size() != chunk.rows()) {
    return Unreadable(table, c.name(), absl::StrCat(c.absent_size(), " absent flags in a chunk of ", chunk.rows(),
                                                    " rows"));
  }
  return absl::OkStatus();
}

bool Absent(const v1::ExportColumn& c, int row) { return c.absent_size() > row && c.absent(row); }

// The index of a key column: present, of its type (INT64, or STRING for
// grad_norms' matrix), a value in every row.
absl::StatusOr<int> KeyColumn(const std::string& table, const v1::ExportChunk& chunk, const std::string& name,
                              v1::ExportColumnType type = v1::EXPORT_COLUMN_INT64) {
  for (int i = 0; i < chunk.columns_size(); ++i) {
    const v1::ExportColumn& c = chunk.columns(i);
    if (c.name() != name) continue;
    if (c.type() != type) {
      return Unreadable(table, name, absl::StrCat("a key column of type ", v1::ExportColumnType_Name(c.type())));
    }
    RETURN_IF_ERROR(CheckLength(table, chunk, c));
    for (int r = 0; r < c.absent_size(); ++r) {
      if (c.absent(r)) return Unreadable(table, name, absl::StrCat("a key column with row ", r, " absent"));
    }
    return i;
  }
  return Unreadable(table, name, "missing (a key column)");
}

// Each column's field: an alias, else the first target that has a bindable
// field of that name (the n-th column of a name takes the n-th such target).
// Checks that the types fit, that each bound column holds a value per row
// and that its enum names are known, so that filling cannot fail.
absl::StatusOr<std::vector<Binding>> Bind(const std::string& table, const v1::ExportChunk& chunk,
                                          const std::vector<const Descriptor*>& targets,
                                          const std::vector<Alias>& aliases = {}) {
  std::vector<Binding> out(chunk.columns_size());
  std::vector<std::string> seen;
  for (int i = 0; i < chunk.columns_size(); ++i) {
    const v1::ExportColumn& c = chunk.columns(i);
    const int occurrence = static_cast<int>(std::count(seen.begin(), seen.end(), c.name()));
    seen.push_back(c.name());
    std::vector<Binding> candidates;
    for (const Alias& a : aliases) {
      if (c.name() == a.column) candidates.push_back({a.target, targets[a.target]->FindFieldByName(a.field)});
    }
    for (int t = 0; t < static_cast<int>(targets.size()); ++t) {
      const FieldDescriptor* f = targets[t]->FindFieldByName(c.name());
      if (f != nullptr && Bindable(*f)) candidates.push_back({t, f});
    }
    if (occurrence >= static_cast<int>(candidates.size())) continue;  // not a field this client knows
    const Binding b = candidates[occurrence];
    if (!Fits(c.type(), *b.field)) {
      return Unreadable(table, c.name(),
                        absl::StrCat(v1::ExportColumnType_Name(c.type()), " does not fit ", b.field->full_name()));
    }
    RETURN_IF_ERROR(CheckLength(table, chunk, c));
    if (b.field->cpp_type() == FieldDescriptor::CPPTYPE_ENUM) {
      for (int r = 0; r < chunk.rows(); ++r) {
        if (!Absent(c, r) && b.field->enum_type()->FindValueByName(c.strings(r)) == nullptr) {
          return Unreadable(table, c.name(), absl::StrCat("no ", b.field->enum_type()->name(), " value ",
                                                          QuoteForError(c.strings(r))));
        }
      }
    }
    out[i] = b;
  }
  return out;
}

// Writes a column checked by Bind into each row's message; a null message
// (a row not kept) and an absent value are skipped.
void Fill(const v1::ExportColumn& c, const FieldDescriptor& f, const std::vector<Message*>& rows) {
  const Reflection* r = nullptr;
  for (Message* m : rows) {
    if (m != nullptr) {
      r = m->GetReflection();
      break;
    }
  }
  if (r == nullptr) return;
  auto each = [&](auto&& set) {
    for (int i = 0; i < static_cast<int>(rows.size()); ++i) {
      if (rows[i] != nullptr && !Absent(c, i)) set(rows[i], i);
    }
  };
  switch (f.cpp_type()) {
    case FieldDescriptor::CPPTYPE_DOUBLE: each([&](Message* m, int i) { r->SetDouble(m, &f, c.doubles(i)); }); break;
    case FieldDescriptor::CPPTYPE_FLOAT:
      each([&](Message* m, int i) { r->SetFloat(m, &f, static_cast<float>(c.doubles(i))); });
      break;
    // The export makes its INT64 columns from fields of these types, so the
    // values fit them.
    case FieldDescriptor::CPPTYPE_INT32:
      each([&](Message* m, int i) { r->SetInt32(m, &f, static_cast<int32_t>(c.ints(i))); });
      break;
    case FieldDescriptor::CPPTYPE_INT64: each([&](Message* m, int i) { r->SetInt64(m, &f, c.ints(i)); }); break;
    case FieldDescriptor::CPPTYPE_UINT32:
      each([&](Message* m, int i) { r->SetUInt32(m, &f, static_cast<uint32_t>(c.ints(i))); });
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      each([&](Message* m, int i) { r->SetUInt64(m, &f, static_cast<uint64_t>(c.ints(i))); });
      break;
    case FieldDescriptor::CPPTYPE_BOOL: each([&](Message* m, int i) { r->SetBool(m, &f, c.ints(i) != 0); }); break;
    case FieldDescriptor::CPPTYPE_STRING: each([&](Message* m, int i) { r->SetString(m, &f, c.strings(i)); }); break;
    case FieldDescriptor::CPPTYPE_ENUM:
      each([&](Message* m, int i) { r->SetEnum(m, &f, f.enum_type()->FindValueByName(c.strings(i))); });
      break;
    case FieldDescriptor::CPPTYPE_MESSAGE:  // a Timestamp, in microseconds since the epoch
      each([&](Message* m, int i) {
        auto* t = static_cast<google::protobuf::Timestamp*>(r->MutableMessage(m, &f));
        const int64_t us = c.ints(i);
        const int64_t s = us >= 0 ? us / 1000000 : -((-us + 999999) / 1000000);
        t->set_seconds(s);
        t->set_nanos(static_cast<int32_t>((us - s * 1000000) * 1000));
      });
      break;
  }
}

void FillAll(const v1::ExportChunk& chunk, const std::vector<Binding>& bindings,
             const std::vector<std::vector<Message*>>& rows_by_target) {
  for (int i = 0; i < chunk.columns_size(); ++i) {
    if (bindings[i].field != nullptr) Fill(chunk.columns(i), *bindings[i].field, rows_by_target[bindings[i].target]);
  }
}

// Sorts rows by key, keeping of rows with equal keys the last to arrive.
// Rows usually come in key order already: then it costs a comparison each.
template <typename Rows, typename Key>
void SortKeepLast(Rows& rows, Key key) {
  bool ordered = true;
  for (int i = 1; i < static_cast<int>(rows.size()) && ordered; ++i) ordered = key(rows[i - 1]) < key(rows[i]);
  if (ordered) return;
  if constexpr (requires { rows.pointer_begin(); }) {  // a RepeatedPtrField: move the pointers only
    using T = std::remove_reference_t<decltype(rows[0])>;
    std::stable_sort(rows.pointer_begin(), rows.pointer_end(), [&](T* a, T* b) { return key(*a) < key(*b); });
  } else {
    std::stable_sort(rows.begin(), rows.end(), [&](const auto& a, const auto& b) { return key(a) < key(b); });
  }
  int kept = 0;
  for (int i = 0; i < static_cast<int>(rows.size()); ++i) {
    if (i + 1 < static_cast<int>(rows.size()) && !(key(rows[i]) < key(rows[i + 1]))) continue;  // a later one wins
    if (kept != i) {
      if constexpr (requires { rows.pointer_begin(); }) {
        rows.SwapElements(kept, i);
      } else {
        std::swap(rows[kept], rows[i]);
      }
    }
    ++kept;
  }
  if constexpr (requires { rows.pointer_begin(); }) {
    rows.DeleteSubrange(kept, rows.size() - kept);
  } else {
    rows.resize(kept);
  }
}

}  // namespace

absl::Status ExportReader::Add(const std::string& table, const v1::ExportChunk& chunk) {
  if (table == "trials") return AddTrials(chunk);
  if (table == "metrics") return AddMetrics(chunk);
  if (table == "grad_norms") return AddGradNorms(chunk);
  if (table == "diagnostics") return AddDiagnostics(chunk);
  return absl::InvalidArgumentError(absl::StrCat(
      "table: ", QuoteForError(table), " is not one the report reads (trials, metrics, grad_norms, diagnostics)"));
}

ExportReader::Entry& ExportReader::EntryOf(int64_t trial_id) {
  if (cached_ == nullptr || cached_id_ != trial_id) {
    cached_ = &entries_[trial_id];
    cached_id_ = trial_id;
  }
  return *cached_;
}

absl::Status ExportReader::AddTrials(const v1::ExportChunk& chunk) {
  constexpr char kTable[] = "trials";
  ASSIGN_OR_RETURN(const int id_column, KeyColumn(kTable, chunk, "trial_id"));
  ASSIGN_OR_RETURN(const std::vector<Binding> bindings,
                   Bind(kTable, chunk,
                        {v1::Trial::descriptor(), v1::TrainConfig::descriptor(), v1::TrialResult::descriptor()},
                        {{"trial_id", 0, "id"}, {"trial_index", 0, "index"}, {"peak_lr", 1, "lr"}}));
  const auto& ids = chunk.columns(id_column).ints();
  std::vector<Entry*> entries(chunk.rows());
  for (int r = 0; r < chunk.rows(); ++r) {
    entries[r] = &EntryOf(ids[r]);
    entries[r]->last_row = r;
  }
  std::vector<std::vector<Message*>> rows(3, std::vector<Message*>(chunk.rows(), nullptr));
  for (int r = 0; r < chunk.rows(); ++r) {
    Entry& e = *entries[r];
    if (e.last_row != r) continue;  // the same trial again further down this chunk
    e.has_trial = true;
    e.trial.Clear();
    e.trial.set_sweep_id(sweep_id_);
    rows[0][r] = &e.trial;
    rows[1][r] = e.trial.mutable_config();
    rows[2][r] = e.trial.mutable_result();
  }
  FillAll(chunk, bindings, rows);
  return absl::OkStatus();
}

absl::Status ExportReader::AddMetrics(const v1::ExportChunk& chunk) {
  constexpr char kTable[] = "metrics";
  ASSIGN_OR_RETURN(const int id_column, KeyColumn(kTable, chunk, "trial_id"));
  RETURN_IF_ERROR(KeyColumn(kTable, chunk, "step").status());
  ASSIGN_OR_RETURN(const std::vector<Binding> bindings, Bind(kTable, chunk, {v1::MetricPoint::descriptor()}));
  read_metrics_ = true;
  // Rows with a value: those of a column without absent flags, else those
  // with a value in some column. The others are not kept (see the header).
  std::vector<bool> valued(chunk.rows(), false);
  for (int i = 0; i < chunk.columns_size(); ++i) {
    const v1::ExportColumn& c = chunk.columns(i);
    if (bindings[i].field == nullptr || c.name() == "step") continue;
    if (c.absent().empty()) {
      valued.assign(chunk.rows(), true);
      break;
    }
    for (int r = 0; r < chunk.rows(); ++r) valued[r] = valued[r] || !c.absent(r);
  }
  const auto& ids = chunk.columns(id_column).ints();
  std::vector<std::vector<Message*>> rows(1, std::vector<Message*>(chunk.rows(), nullptr));
  for (int r = 0; r < chunk.rows(); ++r) {
    if (valued[r]) rows[0][r] = EntryOf(ids[r]).metrics.Add();
  }
  FillAll(chunk, bindings, rows);
  return absl::OkStatus();
}

absl::Status ExportReader::AddGradNorms(const v1::ExportChunk& chunk) {
  constexpr char kTable[] = "grad_norms";
  ASSIGN_OR_RETURN(const int id_column, KeyColumn(kTable, chunk, "trial_id"));
  ASSIGN_OR_RETURN(const int step_column, KeyColumn(kTable, chunk, "step"));
  ASSIGN_OR_RETURN(const int layer_column, KeyColumn(kTable, chunk, "layer"));
  ASSIGN_OR_RETURN(const int matrix_column, KeyColumn(kTable, chunk, "matrix", v1::EXPORT_COLUMN_STRING));
  const v1::ExportColumn* norms = nullptr;
  for (const v1::ExportColumn& c : chunk.columns()) {
    if (c.name() != "norm") continue;
    if (c.type() != v1::EXPORT_COLUMN_DOUBLE && c.type() != v1::EXPORT_COLUMN_FLOAT) {
      return Unreadable(kTable, c.name(), absl::StrCat(v1::ExportColumnType_Name(c.type()), " is not a norm"));
    }
    RETURN_IF_ERROR(CheckLength(kTable, chunk, c));
    norms = &c;
  }
  if (norms == nullptr) return Unreadable(kTable, "norm", "missing");
  read_grad_norms_ = true;
  const auto& ids = chunk.columns(id_column).ints();
  const auto& steps = chunk.columns(step_column).ints();
  const auto& layers = chunk.columns(layer_column).ints();
  const auto& matrices = chunk.columns(matrix_column).strings();
  for (int r = 0; r < chunk.rows(); ++r) {
    EntryOf(ids[r]).grad_rows.push_back({static_cast<int32_t>(steps[r]), static_cast<int32_t>(layers[r]), matrices[r],
                                         Absent(*norms, r) ? std::nullopt : std::optional<double>(norms->doubles(r))});
  }
  return absl::OkStatus();
}

absl::Status ExportReader::AddDiagnostics(const v1::ExportChunk& chunk) {
  constexpr char kTable[] = "diagnostics";
  ASSIGN_OR_RETURN(const int id_column, KeyColumn(kTable, chunk, "trial_id"));
  RETURN_IF_ERROR(KeyColumn(kTable, chunk, "step").status());
  RETURN_IF_ERROR(KeyColumn(kTable, chunk, "layer").status());
  ASSIGN_OR_RETURN(const std::vector<Binding> bindings,
                   Bind(kTable, chunk, {v1::StepDiagnostics::descriptor(), v1::LayerDiagnostics::descriptor()}));
  read_diagnostics_ = true;
  const auto& ids = chunk.columns(id_column).ints();
  std::vector<std::vector<Message*>> rows(2, std::vector<Message*>(chunk.rows(), nullptr));
  for (int r = 0; r < chunk.rows(); ++r) {
    if (keep_diagnostics_ && !keep_diagnostics_->contains(ids[r])) continue;
    v1::StepDiagnostics* d = EntryOf(ids[r]).diagnostics.Add();
    rows[0][r] = d;
    rows[1][r] = d->add_layers();
  }
  FillAll(chunk, bindings, rows);
  return absl::OkStatus();
}

std::vector<v1::GetTrialResponse> ExportReader::TakeTrials() {
  std::vector<v1::GetTrialResponse> out;
  for (auto& [id, e] : entries_) {
    if (e.has_trial) *out.emplace_back().mutable_trial() = std::move(e.trial);
  }
  std::sort(out.begin(), out.end(), [](const v1::GetTrialResponse& a, const v1::GetTrialResponse& b) {
    return std::make_pair(a.trial().index(), a.trial().id()) < std::make_pair(b.trial().index(), b.trial().id());
  });
  TakeRowsInto(out);
  return out;
}

void ExportReader::TakeRowsInto(std::vector<v1::GetTrialResponse>& trials) {
  for (v1::GetTrialResponse& t : trials) {
    auto it = entries_.find(t.trial().id());
    Entry* e = it == entries_.end() ? nullptr : &it->second;
    if (read_metrics_) {
      t.clear_metrics();
      if (e != nullptr) {
        SortKeepLast(e->metrics, [](const v1::MetricPoint& m) { return m.step(); });
        t.mutable_metrics()->Swap(&e->metrics);
      }
    }
    if (read_grad_norms_) {
      t.clear_layer_grad_norms();
      if (e != nullptr) {
        SortKeepLast(e->grad_rows,
                     [](const GradRow& g) { return std::tie(g.step, g.layer, g.matrix); });
        for (const GradRow& g : e->grad_rows) {
          if (!g.norm) continue;
          if (t.layer_grad_norms().empty() || t.layer_grad_norms().rbegin()->step() != g.step) {
            t.add_layer_grad_norms()->set_step(g.step);
          }
          v1::LayerGradNorm* n = t.mutable_layer_grad_norms()->rbegin()->add_norms();
          n->set_layer(g.layer);
          n->set_matrix(g.matrix);
          n->set_norm(*g.norm);
        }
      }
    }
    if (read_diagnostics_) {
      t.clear_diagnostics();
      if (e != nullptr) {
        SortKeepLast(e->diagnostics, [](const v1::StepDiagnostics& d) {
          return std::make_pair(d.step(), d.layers(0).layer());
        });
        for (v1::StepDiagnostics& row : e->diagnostics) {
          if (t.diagnostics().empty() || t.diagnostics().rbegin()->step() != row.step()) {
            *t.add_diagnostics() = std::move(row);
          } else {
            *t.mutable_diagnostics()->rbegin()->add_layers() = std::move(*row.mutable_layers(0));
          }
        }
      }
    }
  }
  entries_.clear();
  cached_ = nullptr;
  read_metrics_ = read_grad_norms_ = read_diagnostics_ = false;
}

}  // namespace normsweep::client

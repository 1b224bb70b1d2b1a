#include "db/pg_rows.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "db/store.h"
#include "proto/schema/json.h"
#include "proto/schema/train_config.h"

namespace normsweep::db {
namespace {

// A trial's stored config as sql::kTrialColumns reads it: config_pb in hex
// after "\x", or, for trials stored before migration 0007, the config as JSON.
absl::Status ParseStoredConfig(absl::string_view stored, v1::TrainConfig& config) {
  if (!absl::ConsumePrefix(&stored, "\\x")) {
    ASSIGN_OR_RETURN(config, schema::TrainConfigFromJson(std::string(stored)));
    return absl::OkStatus();
  }
  if (stored.size() % 2 != 0 || !std::all_of(stored.begin(), stored.end(), absl::ascii_isxdigit) ||
      !config.ParseFromString(absl::HexStringToBytes(stored))) {
    return absl::InvalidArgumentError("config_pb is not a TrainConfig");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int> ColumnOf(const PgResult& r, const char* name) {
  const int column = r.column(name);
  if (column < 0) return absl::InternalError(absl::StrCat("the statement's result has no column ", name));
  return column;
}

absl::StatusOr<std::vector<FieldColumn>> FieldColumns(const PgResult& r, const google::protobuf::Descriptor& type,
                                                      FieldRenames renames) {
  using google::protobuf::FieldDescriptor;
  std::vector<FieldColumn> out;
  for (int i = 0; i < type.field_count(); ++i) {
    const FieldDescriptor* field = type.field(i);
    std::string name = field->name();
    for (const auto& [field_name, column_name] : renames) {
      if (name == field_name) name = column_name;
    }
    const int column = r.column(name.c_str());
    if (column < 0) continue;
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32:
      case FieldDescriptor::CPPTYPE_INT64:
      case FieldDescriptor::CPPTYPE_DOUBLE:
      case FieldDescriptor::CPPTYPE_STRING:
      case FieldDescriptor::CPPTYPE_BOOL:
        if (!field->is_repeated()) break;
        [[fallthrough]];
      default:
        return absl::InternalError(absl::StrCat("column ", name, ": ", type.name(), ".", field->name(),
                                                " is not a field that a column is read into"));
    }
    out.push_back({field, column});
  }
  return out;
}

void ReadRow(const PgResult& r, int row, const std::vector<FieldColumn>& columns, google::protobuf::Message& into) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection& reflection = *into.GetReflection();
  for (const auto& [field, column] : columns) {
    if (r.IsNull(row, column)) continue;
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32: reflection.SetInt32(&into, field, GetInt32(r, row, column)); break;
      case FieldDescriptor::CPPTYPE_INT64: reflection.SetInt64(&into, field, r.GetInt64(row, column)); break;
      case FieldDescriptor::CPPTYPE_DOUBLE: reflection.SetDouble(&into, field, r.GetDouble(row, column)); break;
      case FieldDescriptor::CPPTYPE_STRING: reflection.SetString(&into, field, r.GetString(row, column)); break;
      case FieldDescriptor::CPPTYPE_BOOL: reflection.SetBool(&into, field, r.GetBool(row, column)); break;
      default: break;  // FieldColumns admits none other
    }
  }
}

absl::StatusOr<TrialColumns> TrialColumns::Of(const PgResult& r) {
  static constexpr std::pair<const char*, int TrialColumns::*> kNames[] = {
      {"id", &TrialColumns::id},
      {"sweep_id", &TrialColumns::sweep_id},
      {"trial_index", &TrialColumns::trial_index},
      {"config", &TrialColumns::config},
      {"variant", &TrialColumns::variant},
      {"state", &TrialColumns::state},
      {"attempts", &TrialColumns::attempts},
      {"worker_id", &TrialColumns::worker_id},
      {"lease_expires_us", &TrialColumns::lease_expires_us},
      {"last_step", &TrialColumns::last_step},
      {"last_train_loss", &TrialColumns::last_train_loss},
      {"last_val_loss", &TrialColumns::last_val_loss},
      {"final_val_loss", &TrialColumns::final_val_loss},
      {"best_val_loss", &TrialColumns::best_val_loss},
      {"final_train_loss", &TrialColumns::final_train_loss},
      {"final_val_accuracy", &TrialColumns::final_val_accuracy},
      {"diverged_step", &TrialColumns::diverged_step},
      {"tokens_per_s", &TrialColumns::tokens_per_s},
      {"error", &TrialColumns::error},
      {"init_val_loss", &TrialColumns::init_val_loss},
      {"created_us", &TrialColumns::created_us},
      {"started_us", &TrialColumns::started_us},
      {"finished_us", &TrialColumns::finished_us},
      {"update_seq", &TrialColumns::update_seq},
      {"boundary_line", &TrialColumns::boundary_line},
      {"interruptions", &TrialColumns::interruptions},
      {"unigram_loss", &TrialColumns::unigram_loss},
      {"val_loss_progress", &TrialColumns::val_loss_progress},
  };
  TrialColumns c;
  for (const auto& [name, column] : kNames) {
    ASSIGN_OR_RETURN(c.*column, ColumnOf(r, name));
  }
  return c;
}

absl::StatusOr<v1::Trial> ParseTrial(const PgResult& r, const TrialColumns& c, int row) {
  v1::Trial t;
  t.set_id(r.GetInt64(row, c.id));
  t.set_sweep_id(r.GetInt64(row, c.sweep_id));
  t.set_index(GetInt32(r, row, c.trial_index));
  if (absl::Status st = ParseStoredConfig(r.GetString(row, c.config), *t.mutable_config()); !st.ok()) {
    return absl::DataLossError(absl::StrCat("trial ", t.id(), ": stored config: ", st.message()));
  }
  t.set_variant(r.GetString(row, c.variant));
  t.set_state(TrialStateFromName(r.GetString(row, c.state)));
  t.set_attempts(GetInt32(r, row, c.attempts));
  t.set_interruptions(GetInt32(r, row, c.interruptions));
  t.set_worker_id(r.GetInt64(row, c.worker_id));
  NS_SET_TIME(r, row, c.lease_expires_us, t, lease_expires_at);
  t.set_last_step(GetInt32(r, row, c.last_step));
  if (auto v = r.GetOptionalDouble(row, c.last_train_loss)) t.set_last_train_loss(*v);
  if (auto v = r.GetOptionalDouble(row, c.last_val_loss)) t.set_last_val_loss(*v);
  v1::TrialResult* res = t.mutable_result();
  if (auto v = r.GetOptionalDouble(row, c.final_val_loss)) res->set_final_val_loss(*v);
  if (auto v = r.GetOptionalDouble(row, c.best_val_loss)) res->set_best_val_loss(*v);
  if (auto v = r.GetOptionalDouble(row, c.final_train_loss)) res->set_final_train_loss(*v);
  if (auto v = r.GetOptionalDouble(row, c.final_val_accuracy)) res->set_final_val_accuracy(*v);
  if (auto v = GetOptionalInt32(r, row, c.diverged_step)) res->set_diverged_step(*v);
  if (auto v = r.GetOptionalDouble(row, c.tokens_per_s)) res->set_tokens_per_s(*v);
  res->set_error(r.GetString(row, c.error));
  if (auto v = r.GetOptionalDouble(row, c.init_val_loss)) res->set_init_val_loss(*v);
  if (auto v = r.GetOptionalDouble(row, c.unigram_loss)) res->set_unigram_loss(*v);
  if (auto v = r.GetOptionalDouble(row, c.val_loss_progress)) res->set_val_loss_progress(*v);
  NS_SET_TIME(r, row, c.created_us, t, created_at);
  NS_SET_TIME(r, row, c.started_us, t, started_at);
  NS_SET_TIME(r, row, c.finished_us, t, finished_at);
  if (auto v = GetOptionalInt32(r, row, c.boundary_line)) t.set_boundary_line(*v);
  return t;
}

absl::StatusOr<std::vector<v1::Trial>> ParseTrials(const PgResult& r) {
  std::vector<v1::Trial> out;
  out.reserve(r.rows());
  ASSIGN_OR_RETURN(const TrialColumns c, TrialColumns::Of(r));
  for (int i = 0; i < r.rows(); ++i) {
    ASSIGN_OR_RETURN(v1::Trial t, ParseTrial(r, c, i));
    out.push_back(std::move(t));
  }
  return out;
}

absl::StatusOr<v1::Trial> ParseFirstTrial(const PgResult& r) {
  ASSIGN_OR_RETURN(const TrialColumns c, TrialColumns::Of(r));
  return ParseTrial(r, c, 0);
}

absl::StatusOr<std::vector<v1::Sweep>> ParseSweeps(const PgResult& r) {
  std::vector<v1::Sweep> out;
  for (int i = 0; i < r.rows(); ++i) {
    v1::Sweep s;
    s.set_id(r.GetInt64(i, 0));
    s.set_request_id(r.GetString(i, 1));
    s.set_name(r.GetString(i, 2));
    // A spec stored by a newer version may have more fields.
    absl::Status st = schema::FromJson(r.GetString(i, 3), schema::UnknownFields::kIgnore, s.mutable_spec());
    if (!st.ok()) return absl::DataLossError(absl::StrCat("sweep ", s.id(), ": stored spec: ", st.message()));
    s.set_state(SweepStateFromName(r.GetString(i, 4)));
    s.set_trial_count(GetInt32(r, i, 5));
    NS_SET_TIME(r, i, 6, s, created_at);
    NS_SET_TIME(r, i, 7, s, finished_at);
    // A sweep stored before max_interruptions existed (0015) has it only in
    // its column, which holds the default for it.
    if (s.spec().max_interruptions() == 0) s.mutable_spec()->set_max_interruptions(GetInt32(r, i, 8));
    s.set_submitted_by(r.GetString(i, 9));
    s.set_cancelled_by(r.GetString(i, 10));
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace normsweep::db

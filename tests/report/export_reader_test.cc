// ExportReader from hand-made ExportChunks (rows again, out of order, in
// one chunk and across chunks; unknown columns; chunks it cannot read), and
// from chunks that the scheduler's own builder (db/export.cc) made of fully
// set messages, so that every field the export carries comes back.
#include "client/report/export_reader.h"

#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/report/page.h"
#include "client/report/report.h"
#include "db/export.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/report/report_fixture.h"

namespace normsweep::client {
namespace {

using ::google::protobuf::FieldDescriptor;
using ::google::protobuf::Message;
using ::testing::HasSubstr;

constexpr int64_t kSweep = 7;

v1::ExportColumn Column(const std::string& name, v1::ExportColumnType type, std::vector<bool> absent) {
  v1::ExportColumn c;
  c.set_name(name);
  c.set_type(type);
  for (bool a : absent) c.add_absent(a);
  return c;
}
v1::ExportColumn Ints(const std::string& name, std::vector<int64_t> values, std::vector<bool> absent = {},
                      v1::ExportColumnType type = v1::EXPORT_COLUMN_INT64) {
  v1::ExportColumn c = Column(name, type, absent);
  for (int64_t v : values) c.add_ints(v);
  return c;
}
v1::ExportColumn Doubles(const std::string& name, std::vector<double> values, std::vector<bool> absent = {}) {
  v1::ExportColumn c = Column(name, v1::EXPORT_COLUMN_DOUBLE, absent);
  for (double v : values) c.add_doubles(v);
  return c;
}
v1::ExportColumn Strings(const std::string& name, std::vector<std::string> values, std::vector<bool> absent = {}) {
  v1::ExportColumn c = Column(name, v1::EXPORT_COLUMN_STRING, absent);
  for (const std::string& v : values) c.add_strings(v);
  return c;
}
v1::ExportChunk Chunk(int rows, std::vector<v1::ExportColumn> columns) {
  v1::ExportChunk chunk;
  chunk.set_rows(rows);
  for (v1::ExportColumn& c : columns) *chunk.add_columns() = std::move(c);
  return chunk;
}

template <typename M>
M Parse(const std::string& text) {
  M m;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &m)) << text;
  return m;
}

::testing::AssertionResult SameMessage(const Message& want, const Message& got) {
  google::protobuf::util::MessageDifferencer d;
  std::string diff;
  d.ReportDifferencesToString(&diff);
  if (d.Compare(want, got)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << diff << "want: " << want.ShortDebugString()
                                       << "\ngot:  " << got.ShortDebugString();
}

// Two trials, given out of index order.
v1::ExportChunk TwoTrials() {
  return Chunk(2, {Ints("trial_id", {12, 11}), Ints("trial_index", {1, 0}), Strings("variant", {"", ""}),
                   Strings("state", {"TRIAL_DIVERGED", "TRIAL_SUCCEEDED"}), Ints("attempts", {1, 2}),
                   Ints("worker_id", {0, 3}, {true, false}),
                   Ints("created_at", {1767225600123456, 1767225600000000}, {}, v1::EXPORT_COLUMN_TIMESTAMP),
                   Ints("started_at", {0, -1500000}, {true, false}, v1::EXPORT_COLUMN_TIMESTAMP),
                   Strings("placement", {"post", "pre"}), Doubles("peak_lr", {1e-2, 1e-3}),
                   Ints("warmup_steps", {0, 100}), Doubles("mix_post_fraction", {0, 0.5}, {true, false}),
                   Ints("qk_norm", {1, 0}, {}, v1::EXPORT_COLUMN_BOOL),
                   Doubles("final_val_loss", {0, 2.5}, {true, false}), Ints("diverged_step", {40, 0}, {false, true}),
                   Strings("error", {"", ""})});
}

TEST(ExportReaderTest, TrialsComeByIndexWithTheirFieldsByName) {
  ExportReader reader(kSweep);
  ASSERT_TRUE(reader.Add("trials", TwoTrials()).ok());
  const std::vector<v1::GetTrialResponse> trials = reader.TakeTrials();
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_TRUE(SameMessage(Parse<v1::Trial>(R"pb(
    id: 11 sweep_id: 7 index: 0 state: TRIAL_SUCCEEDED attempts: 2 worker_id: 3
    created_at { seconds: 1767225600 } started_at { seconds: -2 nanos: 500000000 }
    config { placement: "pre" lr: 1e-3 warmup_steps: 100 mix_post_fraction: 0.5 }
    result { final_val_loss: 2.5 })pb"), trials[0].trial()));
  EXPECT_TRUE(SameMessage(Parse<v1::Trial>(R"pb(
    id: 12 sweep_id: 7 index: 1 state: TRIAL_DIVERGED attempts: 1
    created_at { seconds: 1767225600 nanos: 123456000 }
    config { placement: "post" lr: 1e-2 qk_norm: true }
    result { diverged_step: 40 })pb"), trials[1].trial()));
  EXPECT_FALSE(trials[1].trial().config().has_mix_post_fraction()) << "absent stays unset";
}

// A scheduler before peak_lr sent the peak lr as `lr` only; today's sends
// both (lr deprecated, one release): each reads into TrainConfig.lr.
TEST(ExportReaderTest, ThePeakLrFromEitherColumn) {
  for (const std::vector<std::string>& names :
       {std::vector<std::string>{"lr"}, {"peak_lr"}, {"peak_lr", "lr"}, {"lr", "peak_lr"}}) {
    std::vector<v1::ExportColumn> columns = {Ints("trial_id", {11})};
    for (const std::string& name : names) columns.push_back(Doubles(name, {3e-4}));
    ExportReader reader(kSweep);
    ASSERT_TRUE(reader.Add("trials", Chunk(1, columns)).ok());
    const std::vector<v1::GetTrialResponse> trials = reader.TakeTrials();
    ASSERT_EQ(trials.size(), 1u);
    EXPECT_EQ(trials[0].trial().config().lr(), 3e-4) << names.front();
  }
}

TEST(ExportReaderTest, ATrialSentAgainKeepsItsLastRow) {
  ExportReader reader(kSweep);
  ASSERT_TRUE(reader.Add("trials", TwoTrials()).ok());
  // Trial 11 twice in one chunk, then again: the last row, absent values
  // included, replaces the earlier ones.
  ASSERT_TRUE(reader.Add("trials", Chunk(2, {Ints("trial_id", {11, 11}), Ints("trial_index", {0, 0}),
                                             Strings("state", {"TRIAL_FAILED", "TRIAL_RUNNING"}),
                                             Doubles("final_val_loss", {9, 0}, {false, true})}))
                  .ok());
  const std::vector<v1::GetTrialResponse> trials = reader.TakeTrials();
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_TRUE(SameMessage(Parse<v1::Trial>("id: 11 sweep_id: 7 state: TRIAL_RUNNING config {} result {}"),
                          trials[0].trial()));
  EXPECT_EQ(trials[1].trial().id(), 12);
}

TEST(ExportReaderTest, MetricsByStepTheLastRowOfAStepWinningRowsWithoutValuesLeftOut) {
  ExportReader reader(kSweep);
  ASSERT_TRUE(reader.Add("trials", TwoTrials()).ok());
  // Trial 12's step 7 has no value: not kept.
  ASSERT_TRUE(reader.Add("metrics", Chunk(5, {Ints("trial_id", {11, 11, 12, 11, 12}), Ints("step", {10, 20, 0, 0, 7}),
                                              Doubles("train_loss", {3, 2.5, 0, 0, 0}, {false, false, true, true, true}),
                                              Doubles("val_loss", {0, 2.7, 5.5, 5.6, 0}, {true, false, false, false, true})}))
                  .ok());
  // Step 20 again with its evaluation, and a row of a trial with no trials row.
  ASSERT_TRUE(reader.Add("metrics", Chunk(2, {Ints("trial_id", {11, 99}), Ints("step", {20, 5}),
                                              Doubles("train_loss", {2.4, 1}), Doubles("val_loss", {2.6, 1})}))
                  .ok());
  const std::vector<v1::GetTrialResponse> trials = reader.TakeTrials();
  ASSERT_EQ(trials.size(), 2u);
  v1::GetTrialResponse want = Parse<v1::GetTrialResponse>(R"pb(
    metrics { step: 0 val_loss: 5.6 }
    metrics { step: 10 train_loss: 3 }
    metrics { step: 20 train_loss: 2.4 val_loss: 2.6 })pb");
  *want.mutable_trial() = trials[0].trial();
  EXPECT_TRUE(SameMessage(want, trials[0]));
  ASSERT_EQ(trials[1].metrics_size(), 1);
  EXPECT_TRUE(SameMessage(Parse<v1::MetricPoint>("step: 0 val_loss: 5.5"), trials[1].metrics(0)));
}

// The stored shape, a row per matrix: out of order, a row sent again (the
// last wins, an absent norm included), a matrix the report does not draw
// kept as it came.
TEST(ExportReaderTest, GradNormsGroupedByStepThenLayerAndMatrixAsGetTrial) {
  ExportReader reader(kSweep);
  ASSERT_TRUE(reader.Add("trials", TwoTrials()).ok());
  const std::vector<std::string> matrices = {"ffn.fc1", "ffn.fc1", "ffn.fc2", "ffn.fc1", "attn.qkv", "ffn.fc2"};
  ASSERT_TRUE(reader.Add("grad_norms", Chunk(6, {Ints("trial_id", {11, 11, 11, 11, 11, 11}),
                                                 Ints("step", {5, 0, 0, 0, 0, 0}), Ints("layer", {0, 1, 0, 0, 1, 1}),
                                                 Strings("matrix", matrices),
                                                 Doubles("norm", {7, 1.1, 2.0, 1.0, 0.5, 0},
                                                         {false, false, false, false, false, true})}))
                  .ok());
  // Sent again in a later chunk: trial 11's layer 1 fc1, and fc2 of layer 0 now absent.
  ASSERT_TRUE(reader.Add("grad_norms",
                         Chunk(2, {Ints("trial_id", {11, 11}), Ints("step", {0, 0}), Ints("layer", {1, 0}),
                                   Strings("matrix", {"ffn.fc1", "ffn.fc2"}), Doubles("norm", {9, 0}, {false, true})}))
                  .ok());
  const std::vector<v1::GetTrialResponse> trials = reader.TakeTrials();
  v1::GetTrialResponse want = Parse<v1::GetTrialResponse>(R"pb(
    layer_grad_norms {
      step: 0
      norms { layer: 0 matrix: "ffn.fc1" norm: 1.0 }
      norms { layer: 1 matrix: "attn.qkv" norm: 0.5 }
      norms { layer: 1 matrix: "ffn.fc1" norm: 9 }
    }
    layer_grad_norms { step: 5 norms { layer: 0 matrix: "ffn.fc1" norm: 7 } })pb");
  *want.mutable_trial() = trials[0].trial();
  EXPECT_TRUE(SameMessage(want, trials[0]));
  EXPECT_TRUE(trials[1].layer_grad_norms().empty());
}

TEST(ExportReaderTest, DiagnosticsOfTheKeptTrialsOnlyIntoTrialsReadBefore) {
  ExportReader reader(kSweep);
  ASSERT_TRUE(reader.Add("trials", TwoTrials()).ok());
  std::vector<v1::GetTrialResponse> trials = reader.TakeTrials();
  trials[1].add_diagnostics()->set_step(99);  // replaced by what the export says: nothing kept
  trials[0].add_metrics()->set_step(3);       // a table not read: stays

  ExportReader diagnostics(kSweep);
  diagnostics.KeepDiagnosticsOf({11});
  ASSERT_TRUE(diagnostics.Add("diagnostics", Chunk(4, {Ints("trial_id", {11, 12, 11, 11}), Ints("step", {20, 0, 0, 0}),
                                                       Ints("layer", {0, 0, 1, 0}),
                                                       Doubles("max_attn_logit", {4, 1, 3, 2}),
                                                       Doubles("update_ratio_fc2", {0.1, 0, 0, 0},
                                                               {false, true, true, true})}))
                  .ok());
  diagnostics.TakeRowsInto(trials);
  v1::GetTrialResponse want = Parse<v1::GetTrialResponse>(R"pb(
    metrics { step: 3 }
    diagnostics {
      step: 0
      layers { layer: 0 max_attn_logit: 2 }
      layers { layer: 1 max_attn_logit: 3 }
    }
    diagnostics { step: 20 layers { layer: 0 max_attn_logit: 4 update_ratio_fc2: 0.1 } })pb");
  *want.mutable_trial() = trials[0].trial();
  EXPECT_TRUE(SameMessage(want, trials[0]));
  EXPECT_TRUE(trials[1].diagnostics().empty()) << "trial 12 is not kept";
}

TEST(ExportReaderTest, SkipsColumnsItDoesNotKnow) {
  ExportReader reader(kSweep);
  ASSERT_TRUE(reader.Add("metrics", Chunk(1, {Ints("trial_id", {11}), Ints("step", {1}),
                                              Doubles("a_future_metric", {1}), Doubles("lr", {0.5}),
                                              Column("typed_later", static_cast<v1::ExportColumnType>(42), {})}))
                  .ok());
  ASSERT_TRUE(reader.Add("trials", Chunk(1, {Ints("trial_id", {11}), Strings("a_future_field", {"x"})})).ok());
  const std::vector<v1::GetTrialResponse> trials = reader.TakeTrials();
  ASSERT_EQ(trials.size(), 1u);
  ASSERT_EQ(trials[0].metrics_size(), 1);
  EXPECT_TRUE(SameMessage(Parse<v1::MetricPoint>("step: 1 lr: 0.5"), trials[0].metrics(0)));
}

TEST(ExportReaderTest, AChunkItCannotReadIsAnErrorNamingTheColumnAndAddsNothing) {
  struct Case {
    std::string table;
    v1::ExportChunk chunk;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"metrics", Chunk(1, {Ints("trial_id", {1})}), "table metrics, column 'step': missing"},
      {"metrics", Chunk(2, {Ints("trial_id", {1, 1}), Ints("step", {1, 2}, {false, true})}), "row 1 absent"},
      {"metrics", Chunk(1, {Ints("trial_id", {1}), Ints("step", {1}), Strings("lr", {"x"})}),
       "column 'lr': EXPORT_COLUMN_STRING does not fit normsweep.v1.MetricPoint.lr"},
      {"metrics", Chunk(2, {Ints("trial_id", {1, 2}), Ints("step", {1, 1}), Doubles("lr", {1})}),
       "column 'lr': 1 values in a chunk of 2 rows"},
      {"trials", Chunk(1, {Ints("trial_id", {1}), Strings("state", {"TRIAL_SIDEWAYS"})}),
       "column 'state': no TrialState value 'TRIAL_SIDEWAYS'"},
      {"grad_norms",
       Chunk(1, {Ints("trial_id", {1}), Ints("step", {0}), Ints("layer", {0}), Strings("matrix", {"ffn.fc1"}),
                 Strings("norm", {"x"})}),
       "column 'norm': EXPORT_COLUMN_STRING is not a norm"},
      {"grad_norms",
       Chunk(1, {Ints("trial_id", {1}), Ints("step", {0}), Ints("layer", {0}), Strings("matrix", {"ffn.fc1"})}),
       "column 'norm': missing"},
      {"grad_norms",
       Chunk(2, {Ints("trial_id", {1, 1}), Ints("step", {0, 0}), Ints("layer", {0, 0}),
                 Strings("matrix", {"ffn.fc1", ""}, {false, true}), Doubles("norm", {1, 2})}),
       "column 'matrix': a key column with row 1 absent"},
      {"grad_norms",
       Chunk(1, {Ints("trial_id", {1}), Ints("step", {0}), Ints("layer", {0}), Ints("matrix", {1}),
                 Doubles("norm", {1})}),
       "column 'matrix': a key column of type EXPORT_COLUMN_INT64"},
      // The wide shape of a scheduler before issue 37.
      {"grad_norms",
       Chunk(1, {Ints("trial_id", {1}), Ints("step", {0}), Ints("layer", {0}), Doubles("w1", {1}), Doubles("w2", {2})}),
       "column 'matrix': missing (a key column)"},
      {"attempts", Chunk(0, {}), "'attempts' is not one the report reads"},
  };
  for (const Case& c : cases) {
    ExportReader reader(kSweep);
    ASSERT_TRUE(reader.Add("trials", Chunk(1, {Ints("trial_id", {1})})).ok());
    const absl::Status s = reader.Add(c.table, c.chunk);
    EXPECT_FALSE(s.ok()) << c.error;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.error));
    const std::vector<v1::GetTrialResponse> trials = reader.TakeTrials();
    ASSERT_EQ(trials.size(), 1u);
    EXPECT_TRUE(SameMessage(Parse<v1::Trial>("id: 1 sweep_id: 7 config {} result {}"), trials[0].trial()))
        << c.error;
    EXPECT_TRUE(trials[0].metrics().empty()) << c.error;
  }
}

// Every field a column is made of, set to a value of its own (a field
// added to the proto is set too).
void SetEveryField(Message& m, int seed) {
  const auto* d = m.GetDescriptor();
  const auto* r = m.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_repeated()) continue;
    const int v = seed + i + 1;
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_DOUBLE: r->SetDouble(&m, f, v + 0.25); break;
      case FieldDescriptor::CPPTYPE_FLOAT: r->SetFloat(&m, f, v + 0.5f); break;
      case FieldDescriptor::CPPTYPE_INT32: r->SetInt32(&m, f, v); break;
      case FieldDescriptor::CPPTYPE_INT64: r->SetInt64(&m, f, v); break;
      case FieldDescriptor::CPPTYPE_UINT32: r->SetUInt32(&m, f, v); break;
      case FieldDescriptor::CPPTYPE_UINT64: r->SetUInt64(&m, f, v); break;
      case FieldDescriptor::CPPTYPE_BOOL: r->SetBool(&m, f, true); break;
      case FieldDescriptor::CPPTYPE_STRING: r->SetString(&m, f, absl::StrCat("v", v)); break;
      case FieldDescriptor::CPPTYPE_ENUM:
        r->SetEnum(&m, f, f->enum_type()->value(f->enum_type()->value_count() - 1));
        break;
      case FieldDescriptor::CPPTYPE_MESSAGE: break;
    }
  }
}

// The chunks the scheduler's builder makes of rows (db/export.cc).
std::vector<v1::ExportChunk> Exported(const std::string& table,
                                      const std::function<void(db::ExportChunkBuilder&)>& add_rows) {
  v1::ExportSweepRequest request;
  request.set_sweep_id(kSweep);
  request.set_table(table);
  absl::StatusOr<db::ExportPlan> plan = db::PlanExport(request);
  EXPECT_TRUE(plan.ok()) << plan.status();
  db::ExportOptions options;
  options.max_chunk_bytes = 400;  // a few rows a chunk
  std::vector<v1::ExportChunk> chunks;
  db::ExportCallbacks callbacks{[&](const v1::ExportChunk& c) {
                                  chunks.push_back(c);
                                  return true;
                                },
                                [] { return false; }};
  db::ExportChunkBuilder builder(*plan, options, callbacks);
  add_rows(builder);
  builder.Flush({}, true);
  return chunks;
}

TEST(ExportReaderTest, EveryFieldTheSchedulersExportCarriesComesBack) {
  std::vector<v1::GetTrialResponse> want(3);
  for (int k = 0; k < 3; ++k) {
    v1::Trial& t = *want[k].mutable_trial();
    t.set_id(100 + k);
    t.set_sweep_id(kSweep);
    t.set_index(k);
    t.set_variant("layers=" + std::to_string(k));
    t.set_state(v1::TRIAL_SUCCEEDED);
    t.set_attempts(2);
    t.set_interruptions(1);
    t.set_worker_id(5);
    t.mutable_created_at()->set_seconds(1767225600 + k);
    t.mutable_started_at()->set_seconds(1767225601);
    t.mutable_finished_at()->set_nanos(123000);
    SetEveryField(*t.mutable_config(), 10 * k);
    SetEveryField(*t.mutable_result(), 20 * k);
    for (int step = 0; step < 4; ++step) {
      v1::MetricPoint* m = want[k].add_metrics();
      SetEveryField(*m, step);
      m->set_step(step * 10);
    }
    v1::LayerGradNorms* g = want[k].add_layer_grad_norms();
    for (int layer = 0; layer < 2; ++layer) {
      for (const char* matrix : {"ffn.fc1", "ffn.fc2"}) {
        v1::LayerGradNorm* n = g->add_norms();
        n->set_layer(layer);
        n->set_matrix(matrix);
        n->set_norm(layer + (matrix[6] == '2' ? 0.5 : 0.25));
      }
    }
    for (int step = 0; step < 2; ++step) {
      v1::StepDiagnostics* d = want[k].add_diagnostics();
      d->set_step(step * 20);
      for (int layer = 0; layer < 2; ++layer) {
        SetEveryField(*d->add_layers(), step + layer);
        d->mutable_layers(layer)->set_layer(layer);
      }
    }
  }
  ExportReader reader(kSweep);
  auto add_all = [&](const std::string& table, const std::function<void(db::ExportChunkBuilder&)>& rows) {
    const std::vector<v1::ExportChunk> chunks = Exported(table, rows);
    EXPECT_GT(chunks.size(), 1u) << table << ": rows over several chunks";
    for (const v1::ExportChunk& c : chunks) ASSERT_TRUE(reader.Add(table, c).ok()) << table;
  };
  // The trials in reverse: the reader orders them.
  add_all("trials", [&](db::ExportChunkBuilder& b) {
    for (int k = 2; k >= 0; --k) b.AddTrial({k, want[k].trial().id(), 0, 0, ""}, want[k].trial());
  });
  add_all("metrics", [&](db::ExportChunkBuilder& b) {
    for (const v1::GetTrialResponse& t : want) {
      for (const v1::MetricPoint& m : t.metrics()) b.AddMetric({1, t.trial().id(), m.step(), 0, ""}, m);
    }
  });
  add_all("grad_norms", [&](db::ExportChunkBuilder& b) {
    for (const v1::GetTrialResponse& t : want) {
      for (const v1::LayerGradNorm& n : t.layer_grad_norms(0).norms()) {
        b.AddGradNorm({1, t.trial().id(), 0, n.layer(), n.matrix()}, n.norm());
      }
    }
  });
  add_all("diagnostics", [&](db::ExportChunkBuilder& b) {
    for (const v1::GetTrialResponse& t : want) {
      for (const v1::StepDiagnostics& d : t.diagnostics()) {
        for (const v1::LayerDiagnostics& l : d.layers()) b.AddDiagnostics({1, t.trial().id(), d.step(), l.layer(), ""}, l);
      }
    }
  });
  const std::vector<v1::GetTrialResponse> got = reader.TakeTrials();
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) EXPECT_TRUE(SameMessage(want[k], got[k])) << "trial " << k;
}

// FetchReportData asks the export for kReportMetricFields only: the page
// of hand-made trials is the same with every other MetricPoint field set
// and with all of them gone (and the points left without a value).
TEST(ReportMetricFieldsTest, ThePageDrawsNoOtherMetricField) {
  ReportData full = normsweep::testing::LiteratureFigures().data;
  ReportData narrow = full;
  auto listed = [](const FieldDescriptor* f) {
    if (f->name() == "step") return true;
    for (const char* name : kReportMetricFields) {
      if (f->name() == name) return true;
    }
    return false;
  };
  const auto* d = v1::MetricPoint::descriptor();
  for (v1::GetTrialResponse& t : full.trials) {
    for (v1::MetricPoint& m : *t.mutable_metrics()) {
      for (int i = 0; i < d->field_count(); ++i) {
        if (!listed(d->field(i)) && d->field(i)->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE) {
          m.GetReflection()->SetDouble(&m, d->field(i), 0.5 + i + m.step() / 100.0);
        }
      }
    }
  }
  // As the fetch reads them: the points left with a step only are gone.
  for (v1::GetTrialResponse& t : narrow.trials) {
    google::protobuf::RepeatedPtrField<v1::MetricPoint> valued;
    for (v1::MetricPoint& m : *t.mutable_metrics()) {
      for (int i = 0; i < d->field_count(); ++i) {
        if (!listed(d->field(i))) m.GetReflection()->ClearField(&m, d->field(i));
      }
      v1::MetricPoint step_only;
      step_only.set_step(m.step());
      if (m.ByteSizeLong() > step_only.ByteSizeLong()) *valued.Add() = std::move(m);
    }
    t.mutable_metrics()->Swap(&valued);
  }
  const std::string a = RenderReportHtml(full), b = RenderReportHtml(narrow);
  const size_t at = std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin();
  EXPECT_TRUE(a == b) << "the pages differ at byte " << at << ": " << a.substr(at > 200 ? at - 200 : 0, 400);
}

}  // namespace
}  // namespace normsweep::client

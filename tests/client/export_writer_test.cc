// ExportWriter's text from handmade chunks: every column type in CSV and
// JSON lines, absent values, quoting, the header once, and chunks that do
// not hold what they say.
#include "client/export_writer.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "client/progress_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace normsweep::client {
namespace {

using ::testing::HasSubstr;

template <typename T>
void Put(google::protobuf::RepeatedField<T>* field, std::initializer_list<T> values) {
  field->Add(values.begin(), values.end());
}

v1::ExportColumn* Column(v1::ExportChunk& chunk, const std::string& name, v1::ExportColumnType type) {
  v1::ExportColumn* c = chunk.add_columns();
  c->set_name(name);
  c->set_type(type);
  return c;
}

// Two rows of every type; the second row's values absent where marked.
v1::ExportChunk EveryType() {
  v1::ExportChunk chunk;
  chunk.set_rows(2);
  Put<int64_t>(Column(chunk, "trial_id", v1::EXPORT_COLUMN_INT64)->mutable_ints(), {7, -3});
  v1::ExportColumn* d = Column(chunk, "loss", v1::EXPORT_COLUMN_DOUBLE);
  Put<double>(d->mutable_doubles(), {0.1 + 0.2, std::numeric_limits<double>::quiet_NaN()});
  v1::ExportColumn* f = Column(chunk, "beta2", v1::EXPORT_COLUMN_FLOAT);
  Put<double>(f->mutable_doubles(), {static_cast<double>(0.999f), 0});
  Put<bool>(f->mutable_absent(), {false, true});
  Put<int64_t>(Column(chunk, "qk_norm", v1::EXPORT_COLUMN_BOOL)->mutable_ints(), {1, 0});
  // 2026-12-02T06:22:05.000123Z and 1969-12-31T23:59:59.999999Z.
  Put<int64_t>(Column(chunk, "at", v1::EXPORT_COLUMN_TIMESTAMP)->mutable_ints(), {1796192525000123, -1});
  v1::ExportColumn* s = Column(chunk, "name", v1::EXPORT_COLUMN_STRING);
  s->add_strings("a \"b\", c\nd");
  s->add_strings("");
  v1::ExportColumn* inf = Column(chunk, "g", v1::EXPORT_COLUMN_DOUBLE);
  Put<double>(inf->mutable_doubles(), {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()});
  return chunk;
}

TEST(ExportWriterTest, CsvOfEveryType) {
  ExportWriter w(ExportFormat::kCsv);
  std::string out;
  ASSERT_TRUE(w.Append(EveryType(), &out).ok());
  EXPECT_EQ(out,
            "trial_id,loss,beta2,qk_norm,at,name,g\n"
            "7,0.30000000000000004,0.999,true,2026-12-02T06:22:05.000123Z,\"a \"\"b\"\", c\nd\",inf\n"
            "-3,nan,,false,1969-12-31T23:59:59.999999Z,\"\",-inf\n");
  EXPECT_EQ(w.rows(), 2);
  // The next chunk: rows only.
  out.clear();
  ASSERT_TRUE(w.Append(EveryType(), &out).ok());
  EXPECT_EQ(out.find("trial_id"), std::string::npos);
  EXPECT_EQ(w.rows(), 4);
}

TEST(ExportWriterTest, JsonLinesOfEveryType) {
  ExportWriter w(ExportFormat::kJsonl);
  std::string out;
  ASSERT_TRUE(w.Append(EveryType(), &out).ok());
  EXPECT_EQ(out,
            "{\"trial_id\":7,\"loss\":0.30000000000000004,\"beta2\":0.999,\"qk_norm\":true,"
            "\"at\":\"2026-12-02T06:22:05.000123Z\",\"name\":\"a \\\"b\\\", c\\nd\",\"g\":\"Infinity\"}\n"
            "{\"trial_id\":-3,\"loss\":\"NaN\",\"beta2\":null,\"qk_norm\":false,"
            "\"at\":\"1969-12-31T23:59:59.999999Z\",\"name\":\"\",\"g\":\"-Infinity\"}\n");
}

TEST(ExportWriterTest, FloatsReadBackExactly) {
  v1::ExportChunk chunk;
  const std::vector<double> doubles = {1.0 / 3, 1e-300, std::numeric_limits<double>::max(),
                                       std::numeric_limits<double>::denorm_min(), -2.5e-7, 123456789012345678.0};
  chunk.set_rows(static_cast<int>(doubles.size()));
  Column(chunk, "d", v1::EXPORT_COLUMN_DOUBLE)->mutable_doubles()->Add(doubles.begin(), doubles.end());
  v1::ExportColumn* f = Column(chunk, "f", v1::EXPORT_COLUMN_FLOAT);
  for (double d : doubles) f->add_doubles(static_cast<double>(static_cast<float>(d)));
  ExportWriter w(ExportFormat::kCsv, /*csv_header=*/false);
  std::string out;
  ASSERT_TRUE(w.Append(chunk, &out).ok());
  std::istringstream lines(out);
  std::string line;
  for (size_t i = 0; std::getline(lines, line); ++i) {
    const size_t comma = line.find(',');
    EXPECT_EQ(std::strtod(line.substr(0, comma).c_str(), nullptr), doubles[i]) << line;
    EXPECT_EQ(std::strtof(line.substr(comma + 1).c_str(), nullptr), static_cast<float>(doubles[i])) << line;
    EXPECT_LE(line.size() - comma - 1, 15u) << "float32 needs at most 9 digits: " << line;
  }
  EXPECT_THAT(out, HasSubstr("0.3333333333333333,0.33333334\n"));
}

TEST(ExportWriterTest, RefusesChunksThatDoNotHoldWhatTheySay) {
  ExportWriter w(ExportFormat::kCsv);
  std::string out;
  v1::ExportChunk short_column = EveryType();
  short_column.mutable_columns(1)->mutable_doubles()->RemoveLast();
  absl::Status s = w.Append(short_column, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("column 'loss': 1 values"));
  EXPECT_TRUE(out.empty());
  ASSERT_TRUE(w.Append(EveryType(), &out).ok());
  v1::ExportChunk renamed = EveryType();
  renamed.mutable_columns(2)->set_name("beta1");
  s = w.Append(renamed, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("changed mid-stream: 'beta2' then 'beta1'"));
  v1::ExportChunk unknown = EveryType();
  unknown.mutable_columns(0)->set_type(static_cast<v1::ExportColumnType>(99));
  EXPECT_THAT(ExportWriter(ExportFormat::kCsv).Append(unknown, &out).message(), HasSubstr("unknown type 99"));
}

TEST(ExportWriterTest, Formats) {
  EXPECT_EQ(*ParseExportFormat("csv"), ExportFormat::kCsv);
  EXPECT_EQ(*ParseExportFormat("jsonl"), ExportFormat::kJsonl);
  EXPECT_THAT(ParseExportFormat("parquet").status().message(), HasSubstr("got 'parquet'"));
}

TEST(ExportProgressLineTest, ABarOnlyWithATotal) {
  EXPECT_EQ(ExportProgressLine("metrics", 1234567, 0, 41200000, 1.1),
            "export metrics: 1,234,567 rows | 41.2 MB | 1.12M rows/s | 1s");
  EXPECT_EQ(ExportProgressLine("trials", 5000, 10000, 2000000, 2),
            "export trials: [###############...............] 5,000/10,000 rows | 2.0 MB | 2.5k rows/s | 2s");
}

}  // namespace
}  // namespace normsweep::client

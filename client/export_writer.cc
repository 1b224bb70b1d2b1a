#include "client/export_writer.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/json_quote.h"
#include "common/quote.h"

namespace normsweep::client {
namespace {

// The number of values a column holds, in the field its type names.
int ValueCount(const v1::ExportColumn& c) {
  switch (c.type()) {
    case v1::EXPORT_COLUMN_DOUBLE:
    case v1::EXPORT_COLUMN_FLOAT:
      return c.doubles_size();
    case v1::EXPORT_COLUMN_INT64:
    case v1::EXPORT_COLUMN_BOOL:
    case v1::EXPORT_COLUMN_TIMESTAMP:
      return c.ints_size();
    case v1::EXPORT_COLUMN_STRING:
      return c.strings_size();
    default:
      return -1;
  }
}

void AppendInt(int64_t v, std::string* out) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, r.ptr);
}

// The shortest text that reads back to v (to float32 for a FLOAT column
// whose value is one; a value that is not is written as the double it is).
void AppendReal(double v, bool float32, bool json, std::string* out) {
  if (!std::isfinite(v)) {
    if (json) {
      out->append(std::isnan(v) ? "\"NaN\"" : v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    } else {
      out->append(std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
    }
    return;
  }
  char buf[32];
  const auto f = static_cast<float>(v);
  const auto r = float32 && static_cast<double>(f) == v ? std::to_chars(buf, buf + sizeof buf, f)
                                                        : std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, r.ptr);
}

void Append2(int v, std::string* out) {
  out->push_back(static_cast<char>('0' + v / 10));
  out->push_back(static_cast<char>('0' + v % 10));
}

// Microseconds since the epoch as 2026-12-02T06:22:05.123456Z (the civil
// date from the day number: H. Hinnant's days_from_civil, inverted).
void AppendTimestamp(int64_t micros, std::string* out) {
  int64_t secs = micros / 1000000;
  int64_t us = micros % 1000000;
  if (us < 0) {
    us += 1000000;
    --secs;
  }
  int64_t days = secs / 86400;
  int64_t sod = secs % 86400;
  if (sod < 0) {
    sod += 86400;
    --days;
  }
  const int64_t z = days + 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int day = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  const int month = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  const int64_t year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  char buf[48];
  const int n = std::snprintf(buf, sizeof buf, "%04lld-", static_cast<long long>(year));
  out->append(buf, n);
  Append2(month, out);
  out->push_back('-');
  Append2(day, out);
  out->push_back('T');
  Append2(static_cast<int>(sod / 3600), out);
  out->push_back(':');
  Append2(static_cast<int>(sod / 60 % 60), out);
  out->push_back(':');
  Append2(static_cast<int>(sod % 60), out);
  out->push_back('.');
  const std::string frac = std::to_string(us + 1000000);  // "1" then six digits
  out->append(frac, 1, 6);
  out->push_back('Z');
}

void AppendCsvString(const std::string& s, std::string* out) {
  if (!s.empty() && s.find_first_of(",\"\r\n") == std::string::npos) {
    out->append(s);
    return;
  }
  out->push_back('"');
  for (char c : s) {
    if (c == '"') out->push_back('"');
    out->push_back(c);
  }
  out->push_back('"');
}

// One value of a column, present.
void AppendValue(const v1::ExportColumn& c, int row, bool json, std::string* out) {
  switch (c.type()) {
    case v1::EXPORT_COLUMN_DOUBLE:
      AppendReal(c.doubles(row), /*float32=*/false, json, out);
      break;
    case v1::EXPORT_COLUMN_FLOAT:
      AppendReal(c.doubles(row), /*float32=*/true, json, out);
      break;
    case v1::EXPORT_COLUMN_INT64:
      AppendInt(c.ints(row), out);
      break;
    case v1::EXPORT_COLUMN_BOOL:
      out->append(c.ints(row) != 0 ? "true" : "false");
      break;
    case v1::EXPORT_COLUMN_TIMESTAMP:
      if (json) out->push_back('"');
      AppendTimestamp(c.ints(row), out);
      if (json) out->push_back('"');
      break;
    case v1::EXPORT_COLUMN_STRING:
      if (json) {
        out->append(JsonQuote(c.strings(row)));
      } else {
        AppendCsvString(c.strings(row), out);
      }
      break;
    default:
      break;  // refused by Check
  }
}

bool Absent(const v1::ExportColumn& c, int row) { return !c.absent().empty() && c.absent(row); }

}  // namespace

absl::StatusOr<ExportFormat> ParseExportFormat(std::string_view name) {
  if (name == "csv") return ExportFormat::kCsv;
  if (name == "jsonl") return ExportFormat::kJsonl;
  return absl::InvalidArgumentError(absl::StrCat("--format: expected csv or jsonl, got ", QuoteForError(name)));
}

absl::Status ExportWriter::Check(const v1::ExportChunk& chunk) const {
  if (chunk.rows() < 0) return absl::DataLossError(absl::StrCat("the export sent a chunk of ", chunk.rows(), " rows"));
  if (started_ && static_cast<size_t>(chunk.columns_size()) != columns_.size()) {
    return absl::DataLossError(absl::StrCat("the export's columns changed mid-stream: ", columns_.size(), " then ",
                                            chunk.columns_size()));
  }
  for (int i = 0; i < chunk.columns_size(); ++i) {
    const v1::ExportColumn& c = chunk.columns(i);
    if (started_ && (c.name() != columns_[i].name || c.type() != columns_[i].type)) {
      return absl::DataLossError(absl::StrCat("the export's column ", i, " changed mid-stream: ",
                                              QuoteForError(columns_[i].name), " then ", QuoteForError(c.name())));
    }
    const int n = ValueCount(c);
    if (n < 0) {
      return absl::DataLossError(absl::StrCat("column ", QuoteForError(c.name()), ": unknown type ",
                                              static_cast<int>(c.type()), " (a newer scheduler?)"));
    }
    if (n != chunk.rows() || (!c.absent().empty() && c.absent_size() != chunk.rows())) {
      return absl::DataLossError(absl::StrCat("column ", QuoteForError(c.name()), ": ", n, " values (",
                                              c.absent_size(), " absent flags) in a chunk of ", chunk.rows(),
                                              " rows"));
    }
  }
  return absl::OkStatus();
}

void ExportWriter::Header(std::string* out) const {
  for (size_t i = 0; i < columns_.size(); ++i) {
    if (i > 0) out->push_back(',');
    AppendCsvString(columns_[i].name, out);
  }
  out->push_back('\n');
}

absl::Status ExportWriter::Append(const v1::ExportChunk& chunk, std::string* out) {
  if (absl::Status s = Check(chunk); !s.ok()) return s;
  if (!started_) {
    started_ = true;
    for (const v1::ExportColumn& c : chunk.columns()) {
      Column col{c.name(), c.type(), ""};
      col.json_key = JsonQuote(c.name());
      col.json_key.push_back(':');
      columns_.push_back(std::move(col));
    }
    if (format_ == ExportFormat::kCsv && csv_header_) Header(out);
  }
  if (format_ == ExportFormat::kCsv) {
    Csv(chunk, out);
  } else {
    Jsonl(chunk, out);
  }
  rows_ += chunk.rows();
  return absl::OkStatus();
}

void ExportWriter::Csv(const v1::ExportChunk& chunk, std::string* out) const {
  for (int r = 0; r < chunk.rows(); ++r) {
    for (int i = 0; i < chunk.columns_size(); ++i) {
      if (i > 0) out->push_back(',');
      const v1::ExportColumn& c = chunk.columns(i);
      if (!Absent(c, r)) AppendValue(c, r, /*json=*/false, out);
    }
    out->push_back('\n');
  }
}

void ExportWriter::Jsonl(const v1::ExportChunk& chunk, std::string* out) const {
  for (int r = 0; r < chunk.rows(); ++r) {
    out->push_back('{');
    for (int i = 0; i < chunk.columns_size(); ++i) {
      if (i > 0) out->push_back(',');
      out->append(columns_[i].json_key);
      const v1::ExportColumn& c = chunk.columns(i);
      if (Absent(c, r)) {
        out->append("null");
      } else {
        AppendValue(c, r, /*json=*/true, out);
      }
    }
    out->append("}\n");
  }
}

}  // namespace normsweep::client

// `normsweep export`'s text: ExportSweep's columnar chunks as CSV or JSON
// lines, a row at a time, with the export's column names unchanged (trial_id
// first, then step where the table has steps, then the proto's field names:
// the Python client's DataFrame columns).
//
// Values, by the column's ExportColumnType:
//   DOUBLE, FLOAT  the shortest text that reads back to the same double
//                  (float32 for FLOAT), as std::to_chars writes it: never
//                  more digits than %.17g (%.9g) and never rounded;
//                  NaN and infinities as nan, inf, -inf in CSV and as the
//                  strings "NaN", "Infinity", "-Infinity" in JSON (whose
//                  numbers have no such values)
//   INT64          decimal
//   BOOL           true, false
//   TIMESTAMP      RFC 3339 in UTC with microseconds, 2026-12-02T06:22:05.123456Z
//   STRING         CSV: quoted (RFC 4180) when it holds a comma, a quote or a
//                  line break, or is empty; JSON: a string
// An absent value is an empty CSV field (an empty string is "") and a JSON
// null. CSV has one header line of column names, unless told not to (a
// continuation with --since appended to an earlier file).
#ifndef NORMSWEEP_CLIENT_EXPORT_WRITER_H_
#define NORMSWEEP_CLIENT_EXPORT_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "normsweep/v1/sweep_service.pb.h"

namespace normsweep::client {

enum class ExportFormat { kCsv, kJsonl };

// "csv" or "jsonl"; INVALID_ARGUMENT quoting anything else.
absl::StatusOr<ExportFormat> ParseExportFormat(std::string_view name);

class ExportWriter {
 public:
  ExportWriter(ExportFormat format, bool csv_header = true) : format_(format), csv_header_(csv_header) {}

  // Appends the chunk's rows as text to *out (the CSV header before the
  // first chunk's). The first chunk fixes the columns; a later chunk with
  // other columns, or a column whose values do not number chunk.rows(), is
  // DATA_LOSS naming the column, and nothing of it is appended.
  absl::Status Append(const v1::ExportChunk& chunk, std::string* out);

  int64_t rows() const { return rows_; }

 private:
  struct Column {
    std::string name;
    v1::ExportColumnType type;
    std::string json_key;  // "\"name\":", escaped once
  };
  absl::Status Check(const v1::ExportChunk& chunk) const;
  void Header(std::string* out) const;
  void Csv(const v1::ExportChunk& chunk, std::string* out) const;
  void Jsonl(const v1::ExportChunk& chunk, std::string* out) const;

  const ExportFormat format_;
  const bool csv_header_;
  bool started_ = false;
  std::vector<Column> columns_;
  int64_t rows_ = 0;
};

}  // namespace normsweep::client

#endif  // NORMSWEEP_CLIENT_EXPORT_WRITER_H_

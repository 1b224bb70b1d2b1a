#include "scheduler/field_errors.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace normsweep::scheduler {

absl::Status Invalid(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

absl::Status Within(const std::string& where, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(where, ": ", std::string(status.message())));
}

absl::Status CheckStoredText(const std::string& field, const std::string& value, size_t max_length) {
  if (value.size() > max_length) return Invalid(field, absl::StrCat("at most ", max_length, " characters"));
  if (value.find('\0') != std::string::npos) return Invalid(field, "must not contain NUL characters");
  return absl::OkStatus();
}

std::string ShortestDouble(double d) {
  for (int precision = 1; precision <= 17; ++precision) {
    std::string text = absl::StrFormat("%.*g", precision, d);
    double back = 0;
    if (absl::SimpleAtod(text, &back) && back == d) return text;
  }
  return absl::StrFormat("%.17g", d);
}

}  // namespace normsweep::scheduler

// Quoting a bad value in an error message: at most kMaxQuotedBytes of it
// (cut on a UTF-8 character boundary), control characters escaped, and the
// full length said when it was cut, so that a 1 MB value never becomes a 1 MB
// message. Header-only and dependency-free: the trainer core uses it too.
#ifndef NORMSWEEP_COMMON_QUOTE_H_
#define NORMSWEEP_COMMON_QUOTE_H_

#include <cstdio>
#include <string>
#include <string_view>

namespace normsweep {

inline constexpr size_t kMaxQuotedBytes = 100;

// "'value'", or "'first 100 bytes...' (1048576 bytes)".
inline std::string QuoteForError(std::string_view value, size_t max_bytes = kMaxQuotedBytes) {
  size_t cut = value.size();
  if (cut > max_bytes) {
    cut = max_bytes;
    while (cut > 0 && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80) --cut;  // a continuation byte
  }
  std::string out = "'";
  for (char c : value.substr(0, cut)) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  if (cut < value.size()) {
    out += "...' (" + std::to_string(value.size()) + " bytes)";
  } else {
    out += "'";
  }
  return out;
}

}  // namespace normsweep

#endif  // NORMSWEEP_COMMON_QUOTE_H_

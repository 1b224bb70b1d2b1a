// JSON string quoting. Header-only and standard C++ only, so that the
// trainer core (safetensors headers) and the CLI share it.
#ifndef NORMSWEEP_COMMON_JSON_QUOTE_H_
#define NORMSWEEP_COMMON_JSON_QUOTE_H_

#include <cstdio>
#include <string>

namespace normsweep {

// s as a JSON string literal, quotes included.
inline std::string JsonQuote(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned char>(c));
          out += buf;
        } else {
          out.push_back(c);
        }
    }
  }
  return out + "\"";
}

}  // namespace normsweep

#endif  // NORMSWEEP_COMMON_JSON_QUOTE_H_

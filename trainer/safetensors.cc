#include "trainer/safetensors.h"

#include "common/json_quote.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <sstream>

namespace normsweep::trainer {
namespace {

using ::normsweep::JsonQuote;

constexpr uint64_t kMaxHeaderBytes = 100u << 20;

// A minimal JSON reader for safetensors headers: objects, arrays, strings,
// integers, and the other literals (kept as raw text).
struct JsonValue {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  std::string text;  // string contents, or the number's literal
  std::vector<JsonValue> items;
  std::vector<std::pair<std::string, JsonValue>> members;
};

class JsonParser {
 public:
  explicit JsonParser(const std::string& s) : s_(s) {}

  Status Parse(JsonValue* out) {
    TRAINER_RETURN_IF_ERROR(Value(out, 0));
    SkipSpace();
    if (pos_ != s_.size()) return Error("trailing characters");
    return OkStatus();
  }

 private:
  Status Error(const std::string& what) const {
    return DataLoss("safetensors header: " + what + " at byte " + std::to_string(pos_));
  }
  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t')) {
      ++pos_;
    }
  }
  Status Value(JsonValue* v, int depth) {
    if (depth > 16) return Error("nesting too deep");
    SkipSpace();
    if (pos_ >= s_.size()) return Error("unexpected end");
    const char c = s_[pos_];
    if (c == '{') return Object(v, depth);
    if (c == '[') return Array(v, depth);
    if (c == '"') {
      v->kind = JsonValue::kString;
      return String(&v->text);
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      v->kind = JsonValue::kNumber;
      const size_t start = pos_;
      while (pos_ < s_.size() && std::strchr("+-.eE0123456789", s_[pos_]) != nullptr) ++pos_;
      v->text = s_.substr(start, pos_ - start);
      return OkStatus();
    }
    for (const char* lit : {"true", "false", "null"}) {
      if (s_.compare(pos_, std::strlen(lit), lit) == 0) {
        v->kind = lit[0] == 'n' ? JsonValue::kNull : JsonValue::kBool;
        v->text = lit;
        pos_ += std::strlen(lit);
        return OkStatus();
      }
    }
    return Error("unexpected character");
  }
  Status String(std::string* out) {
    ++pos_;  // opening quote
    out->clear();
    while (pos_ < s_.size()) {
      const char c = s_[pos_++];
      if (c == '"') return OkStatus();
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) break;
      const char e = s_[pos_++];
      switch (e) {
        case '"': case '\\': case '/': out->push_back(e); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          if (pos_ + 4 > s_.size() || !IsHex4(pos_)) return Error("bad \\u escape");
          const unsigned cp = static_cast<unsigned>(std::stoul(s_.substr(pos_, 4), nullptr, 16));
          pos_ += 4;
          // Basic multilingual plane only (surrogate pairs are kept as two code points).
          if (cp < 0x80) {
            out->push_back(static_cast<char>(cp));
          } else if (cp < 0x800) {
            out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
            out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
          } else {
            out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
            out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
            out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
          }
          break;
        }
        default: return Error("bad escape");
      }
    }
    return Error("unterminated string");
  }
  Status Array(JsonValue* v, int depth) {
    v->kind = JsonValue::kArray;
    ++pos_;
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return OkStatus();
    }
    while (true) {
      v->items.emplace_back();
      TRAINER_RETURN_IF_ERROR(Value(&v->items.back(), depth + 1));
      SkipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        return OkStatus();
      }
      return Error("expected ',' or ']'");
    }
  }
  Status Object(JsonValue* v, int depth) {
    v->kind = JsonValue::kObject;
    ++pos_;
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return OkStatus();
    }
    while (true) {
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != '"') return Error("expected a key");
      std::string key;
      TRAINER_RETURN_IF_ERROR(String(&key));
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != ':') return Error("expected ':'");
      ++pos_;
      v->members.emplace_back(std::move(key), JsonValue{});
      TRAINER_RETURN_IF_ERROR(Value(&v->members.back().second, depth + 1));
      SkipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        return OkStatus();
      }
      return Error("expected ',' or '}'");
    }
  }

  bool IsHex4(size_t at) const {
    for (size_t i = at; i < at + 4; ++i) {
      if (std::strchr("0123456789abcdefABCDEF", s_[i]) == nullptr || s_[i] == '\0') return false;
    }
    return true;
  }

  const std::string& s_;
  size_t pos_ = 0;
};

const JsonValue* Member(const JsonValue& obj, const std::string& key) {
  for (const auto& [k, v] : obj.members) {
    if (k == key) return &v;
  }
  return nullptr;
}

StatusOr<uint64_t> ToUnsigned(const JsonValue& v, const std::string& what) {
  if (v.kind != JsonValue::kNumber || v.text.empty() || v.text[0] == '-' ||
      v.text.find_first_not_of("0123456789") != std::string::npos || v.text.size() > 19) {
    return DataLoss("safetensors: " + what + " is not a non-negative integer");
  }
  return static_cast<uint64_t>(std::stoull(v.text));
}

}  // namespace

size_t SafeTensor::elements() const {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

Status WriteSafeTensors(const std::string& path, const std::map<std::string, std::string>& metadata,
                        const std::vector<TensorToWrite>& tensors) {
  std::ostringstream header;
  header << "{\"__metadata__\":{";
  bool first = true;
  for (const auto& [k, v] : metadata) {
    header << (first ? "" : ",") << JsonQuote(k) << ":" << JsonQuote(v);
    first = false;
  }
  header << "}";
  uint64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    uint64_t n = 1;
    for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
    header << "," << JsonQuote(t.name) << ":{\"dtype\":\"" << (t.floats ? "F32" : "I32") << "\",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); ++i) header << (i ? "," : "") << t.shape[i];
    header << "],\"data_offsets\":[" << offset << "," << offset + 4 * n << "]}";
    offset += 4 * n;
  }
  header << "}";
  std::string h = header.str();
  while (h.size() % 8 != 0) h.push_back(' ');

  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Internal("cannot write '" + tmp + "'");
    uint64_t n = h.size();
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>((n >> (8 * i)) & 0xFF);
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(h.data(), static_cast<std::streamsize>(h.size()));
    for (const TensorToWrite& t : tensors) {
      size_t count = 1;
      for (int64_t d : t.shape) count *= static_cast<size_t>(d);
      const char* data = t.floats ? reinterpret_cast<const char*>(t.floats) : reinterpret_cast<const char*>(t.ints);
      out.write(data, static_cast<std::streamsize>(4 * count));  // x86 and ARM are little-endian
    }
    out.flush();
    if (!out) return Internal("error writing '" + tmp + "'");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return Internal("cannot rename '" + tmp + "' to '" + path + "'");
  return OkStatus();
}

StatusOr<SafeTensorsFile> ReadSafeTensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open '" + path + "'");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  StatusOr<SafeTensorsFile> file = ParseSafeTensors(bytes);
  if (!file.ok()) return Status(file.status().code(), "'" + path + "': " + file.status().message());
  return file;
}

StatusOr<SafeTensorsFile> ParseSafeTensors(const std::string& bytes) {
  if (bytes.size() < 8) return DataLoss("not a safetensors file (shorter than 8 bytes)");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  if (n > kMaxHeaderBytes || n > bytes.size() - 8) return DataLoss("safetensors header length out of range");
  const std::string header = bytes.substr(8, n);
  JsonValue root;
  TRAINER_RETURN_IF_ERROR(JsonParser(header).Parse(&root));
  if (root.kind != JsonValue::kObject) return DataLoss("safetensors header is not a JSON object");
  const size_t data_begin = 8 + n;
  const size_t data_size = bytes.size() - data_begin;

  SafeTensorsFile file;
  for (const auto& [name, v] : root.members) {
    if (name == "__metadata__") {
      if (v.kind != JsonValue::kObject) return DataLoss("safetensors __metadata__ is not an object");
      for (const auto& [k, mv] : v.members) {
        if (mv.kind != JsonValue::kString) return DataLoss("safetensors metadata '" + k + "' is not a string");
        file.metadata[k] = mv.text;
      }
      continue;
    }
    if (v.kind != JsonValue::kObject) return DataLoss("safetensors entry '" + name + "' is not an object");
    const JsonValue* dtype = Member(v, "dtype");
    const JsonValue* shape = Member(v, "shape");
    const JsonValue* offsets = Member(v, "data_offsets");
    if (!dtype || dtype->kind != JsonValue::kString || !shape || shape->kind != JsonValue::kArray || !offsets ||
        offsets->kind != JsonValue::kArray || offsets->items.size() != 2) {
      return DataLoss("safetensors entry '" + name + "' lacks dtype, shape or data_offsets");
    }
    SafeTensor t;
    t.dtype = dtype->text;
    uint64_t elements = 1;
    for (const JsonValue& d : shape->items) {
      TRAINER_ASSIGN_OR_RETURN(uint64_t dim, ToUnsigned(d, "shape of '" + name + "'"));
      if (dim > (1ull << 40) || (dim != 0 && elements > (1ull << 40) / dim)) {
        return DataLoss("safetensors tensor '" + name + "' is too large");
      }
      elements *= dim;
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    TRAINER_ASSIGN_OR_RETURN(uint64_t begin, ToUnsigned(offsets->items[0], "data_offsets of '" + name + "'"));
    TRAINER_ASSIGN_OR_RETURN(uint64_t end, ToUnsigned(offsets->items[1], "data_offsets of '" + name + "'"));
    size_t width;
    if (t.dtype == "F32" || t.dtype == "I32") {
      width = 4;
    } else if (t.dtype == "F64" || t.dtype == "I64") {
      width = 8;
    } else {
      return DataLoss("safetensors tensor '" + name + "' has unsupported dtype " + t.dtype);
    }
    if (begin > end || end > data_size || end - begin != elements * width) {
      return DataLoss("safetensors tensor '" + name + "' has data_offsets outside the file or of the wrong size");
    }
    const char* p = bytes.data() + data_begin + begin;
    if (t.dtype == "F32") {
      t.floats.resize(elements);
      std::memcpy(t.floats.data(), p, elements * 4);
    } else if (t.dtype == "F64") {
      t.floats.resize(elements);
      for (size_t i = 0; i < elements; ++i) {
        double d;
        std::memcpy(&d, p + 8 * i, 8);
        t.floats[i] = static_cast<float>(d);
      }
    } else if (t.dtype == "I32") {
      t.ints.resize(elements);
      std::memcpy(t.ints.data(), p, elements * 4);
    } else {
      t.ints.resize(elements);
      for (size_t i = 0; i < elements; ++i) {
        int64_t d;
        std::memcpy(&d, p + 8 * i, 8);
        if (d < std::numeric_limits<int32_t>::min() || d > std::numeric_limits<int32_t>::max()) {
          return DataLoss("safetensors tensor '" + name + "' holds an I64 value outside int32");
        }
        t.ints[i] = static_cast<int32_t>(d);
      }
    }
    file.tensors[name] = std::move(t);
  }
  return file;
}

}  // namespace normsweep::trainer

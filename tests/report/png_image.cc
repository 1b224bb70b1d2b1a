#include "tests/report/png_image.h"

#include <zlib.h>

#include <cstdlib>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace normsweep::testing {
namespace {

uint32_t Be32(const std::string& s, size_t at) {
  return (uint32_t{static_cast<uint8_t>(s[at])} << 24) | (uint32_t{static_cast<uint8_t>(s[at + 1])} << 16) |
         (uint32_t{static_cast<uint8_t>(s[at + 2])} << 8) | uint32_t{static_cast<uint8_t>(s[at + 3])};
}

uint8_t Paeth(int a, int b, int c) {
  const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  if (pa <= pb && pa <= pc) return static_cast<uint8_t>(a);
  return static_cast<uint8_t>(pb <= pc ? b : c);
}

}  // namespace

absl::StatusOr<PngImage> DecodePng(const std::string& bytes) {
  static const char kSignature[] = "\x89PNG\r\n\x1a\n";
  if (bytes.size() < 8 || std::memcmp(bytes.data(), kSignature, 8) != 0) {
    return absl::InvalidArgumentError("not a PNG file");
  }
  PngImage img;
  int channels = 0;
  std::string idat;
  for (size_t at = 8; at + 12 <= bytes.size();) {
    const uint32_t len = Be32(bytes, at);
    const std::string type = bytes.substr(at + 4, 4);
    if (at + 12 + len > bytes.size()) return absl::InvalidArgumentError("truncated PNG chunk " + type);
    const size_t data = at + 8;
    if (type == "IHDR") {
      img.width = static_cast<int>(Be32(bytes, data));
      img.height = static_cast<int>(Be32(bytes, data + 4));
      const int depth = static_cast<uint8_t>(bytes[data + 8]), colour = static_cast<uint8_t>(bytes[data + 9]);
      const int interlace = static_cast<uint8_t>(bytes[data + 12]);
      if (depth != 8 || (colour != 2 && colour != 6) || interlace != 0) {
        return absl::UnimplementedError(
            absl::StrCat("PNG bit depth ", depth, ", colour type ", colour, ", interlace ", interlace));
      }
      channels = colour == 6 ? 4 : 3;
    } else if (type == "IDAT") {
      idat.append(bytes, data, len);
    } else if (type == "IEND") {
      break;
    }
    at += 12 + len;
  }
  if (channels == 0 || img.width <= 0 || img.height <= 0) return absl::InvalidArgumentError("PNG without IHDR");
  const size_t stride = static_cast<size_t>(img.width) * channels;
  std::vector<uint8_t> raw((stride + 1) * img.height);
  uLongf raw_len = raw.size();
  if (uncompress(raw.data(), &raw_len, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) != Z_OK ||
      raw_len != raw.size()) {
    return absl::InvalidArgumentError("PNG image data does not inflate to its size");
  }
  std::vector<uint8_t> prev(stride, 0), cur(stride);
  img.rgb.resize(static_cast<size_t>(img.width) * img.height * 3);
  for (int y = 0; y < img.height; ++y) {
    const uint8_t* line = &raw[y * (stride + 1)];
    const int filter = line[0];
    for (size_t i = 0; i < stride; ++i) {
      const int a = i >= static_cast<size_t>(channels) ? cur[i - channels] : 0;
      const int b = prev[i];
      const int c = i >= static_cast<size_t>(channels) ? prev[i - channels] : 0;
      int pred = 0;
      switch (filter) {
        case 0: pred = 0; break;
        case 1: pred = a; break;
        case 2: pred = b; break;
        case 3: pred = (a + b) / 2; break;
        case 4: pred = Paeth(a, b, c); break;
        default: return absl::InvalidArgumentError(absl::StrCat("PNG row filter ", filter));
      }
      cur[i] = static_cast<uint8_t>(line[1 + i] + pred);
    }
    for (int x = 0; x < img.width; ++x) {
      for (int k = 0; k < 3; ++k) img.rgb[(static_cast<size_t>(y) * img.width + x) * 3 + k] = cur[x * channels + k];
    }
    std::swap(prev, cur);
  }
  return img;
}

}  // namespace normsweep::testing

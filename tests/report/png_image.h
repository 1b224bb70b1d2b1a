// A small PNG reader for checking screenshots: 8-bit RGB or RGBA, not
// interlaced (what Chromium writes), decoded with zlib.
#ifndef NORMSWEEP_TESTS_REPORT_PNG_IMAGE_H_
#define NORMSWEEP_TESTS_REPORT_PNG_IMAGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace normsweep::testing {

struct PngImage {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // width * height * 3, row by row (alpha dropped)
};

absl::StatusOr<PngImage> DecodePng(const std::string& bytes);

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_REPORT_PNG_IMAGE_H_

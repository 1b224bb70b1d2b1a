// The safetensors format (https://huggingface.co/docs/safetensors): an 8-byte
// little-endian header length N, N bytes of JSON
//   {"__metadata__": {"key": "value"}, "name": {"dtype": "F32", "shape": [..],
//    "data_offsets": [begin, end]}, ...}
// and the tensor bytes (offsets relative to the end of the header). Our own
// reader and writer; the reader checks every offset, size and dtype, so a
// corrupt or truncated file is an error, never a crash.
#ifndef NORMSWEEP_TRAINER_SAFETENSORS_H_
#define NORMSWEEP_TRAINER_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trainer/settings/status.h"

namespace normsweep::trainer {

struct SafeTensor {
  std::string dtype;            // as stored: "F32", "F64", "I32", "I64"
  std::vector<int64_t> shape;
  std::vector<float> floats;    // F32 and F64 (converted) tensors
  std::vector<int32_t> ints;    // I32 and I64 (checked, converted) tensors
  size_t elements() const;
};

struct SafeTensorsFile {
  std::map<std::string, std::string> metadata;
  std::map<std::string, SafeTensor> tensors;
};

// A tensor to write: F32 from floats or I32 from ints.
struct TensorToWrite {
  std::string name;
  std::vector<int64_t> shape;
  const float* floats = nullptr;
  const int32_t* ints = nullptr;
};

// Writes atomically (a temporary file renamed over path).
Status WriteSafeTensors(const std::string& path, const std::map<std::string, std::string>& metadata,
                        const std::vector<TensorToWrite>& tensors);
StatusOr<SafeTensorsFile> ReadSafeTensors(const std::string& path);
StatusOr<SafeTensorsFile> ParseSafeTensors(const std::string& bytes);

}  // namespace normsweep::trainer

#endif  // NORMSWEEP_TRAINER_SAFETENSORS_H_

// The trainer's outside-checkable modes (README "Checking the trainer"):
//   eval:  mean next-byte cross-entropy of a checkpoint over all consecutive
//          non-overlapping windows of seq_len+1 bytes from the start of a file
//   grads: the gradient of the mean loss over the first B such windows, for
//          every parameter, written as safetensors under the parameter names
#ifndef NORMSWEEP_TRAINER_INSPECT_H_
#define NORMSWEEP_TRAINER_INSPECT_H_

#include <cstdint>
#include <string>

#include "trainer/settings/status.h"

namespace normsweep::trainer {

struct InspectOptions {
  std::string checkpoint;
  std::string data_file;
  int batch_size = 32;  // eval: windows per forward pass; grads: the windows used
  int threads = 1;
  std::string device = "cpu";
  std::string out;      // grads: output file
};

struct InspectResult {
  double loss = 0;
  int64_t tokens = 0;
  int64_t windows = 0;
};

StatusOr<InspectResult> EvaluateCheckpoint(const InspectOptions& options);
StatusOr<InspectResult> WriteCheckpointGradients(const InspectOptions& options);

}  // namespace normsweep::trainer

#endif  // NORMSWEEP_TRAINER_INSPECT_H_

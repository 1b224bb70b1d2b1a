#include "trainer/inspect.h"

#include <algorithm>
#include <memory>

#include "trainer/backend.h"
#include "trainer/checkpoint.h"
#include "trainer/data.h"

namespace normsweep::trainer {
namespace {

struct Loaded {
  Checkpoint checkpoint;
  std::vector<uint8_t> bytes;
  std::unique_ptr<Backend> backend;
  int64_t windows = 0;
};

StatusOr<Loaded> Load(const InspectOptions& o) {
  if (o.batch_size < 1) return InvalidArgument("batch_size: must be >= 1");
  Loaded l;
  StatusOr<Checkpoint> c = LoadCheckpoint(o.checkpoint);
  if (!c.ok()) return Status(c.status().code(), "checkpoint: " + c.status().message());
  l.checkpoint = std::move(*c);
  StatusOr<std::vector<uint8_t>> bytes = ReadFileBytes(o.data_file);
  if (!bytes.ok()) return InvalidArgument("data: " + bytes.status().message());
  l.bytes = std::move(*bytes);
  l.windows = WindowCount(0, l.bytes.size(), l.checkpoint.model.seq_len);
  if (l.windows < 1) {
    return InvalidArgument("data: '" + o.data_file + "' is shorter than one window of seq_len+1 = " +
                           std::to_string(l.checkpoint.model.seq_len + 1) + " bytes");
  }
  BackendOptions bo;
  bo.device = o.device;
  bo.threads = o.threads;
  bo.model = l.checkpoint.model;
  bo.max_batch_size = static_cast<int>(std::min<int64_t>(o.batch_size, l.windows));
  TRAINER_ASSIGN_OR_RETURN(l.backend, MakeBackend(bo));
  TRAINER_RETURN_IF_ERROR(l.backend->SetParameters(l.checkpoint.params));
  return l;
}

}  // namespace

StatusOr<InspectResult> EvaluateCheckpoint(const InspectOptions& o) {
  TRAINER_ASSIGN_OR_RETURN(Loaded l, Load(o));
  const int T = l.checkpoint.model.seq_len;
  LossStats total;
  for (int64_t first = 0; first < l.windows; first += o.batch_size) {
    const int count = static_cast<int>(std::min<int64_t>(o.batch_size, l.windows - first));
    TRAINER_ASSIGN_OR_RETURN(LossStats s, l.backend->Evaluate(ConsecutiveWindows(l.bytes, 0, static_cast<int>(first), count, T)));
    total += s;
  }
  return InspectResult{total.mean(), total.count, l.windows};
}

StatusOr<InspectResult> WriteCheckpointGradients(const InspectOptions& o) {
  if (o.out.empty()) return InvalidArgument("out: the gradient file to write is required");
  TRAINER_ASSIGN_OR_RETURN(Loaded l, Load(o));
  if (l.windows < o.batch_size) {
    return InvalidArgument("batch_size: '" + o.data_file + "' holds only " + std::to_string(l.windows) +
                           " windows of seq_len+1 bytes, fewer than " + std::to_string(o.batch_size));
  }
  const int T = l.checkpoint.model.seq_len;
  TRAINER_ASSIGN_OR_RETURN(LossStats s, l.backend->ForwardBackward(ConsecutiveWindows(l.bytes, 0, 0, o.batch_size, T), 0));
  std::vector<float> grads;
  TRAINER_RETURN_IF_ERROR(l.backend->GetGradients(&grads));
  std::map<std::string, std::string> md = ModelMetadata(l.checkpoint.model);
  md["loss"] = std::to_string(s.mean());
  md["batch_size"] = std::to_string(o.batch_size);
  TRAINER_RETURN_IF_ERROR(SaveNamedTensors(o.out, l.backend->layout(), grads, md));
  return InspectResult{s.mean(), s.count, o.batch_size};
}

}  // namespace normsweep::trainer

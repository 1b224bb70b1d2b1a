// Writes trainer events as JSON lines of normsweep.v1.TrainEvent (protobuf's
// JSON mapping, snake_case), one line per event, flushed at once so that a
// reader on a pipe (the worker) sees each event as it happens.
#ifndef NORMSWEEP_TRAINER_FRONTEND_JSON_EVENT_SINK_H_
#define NORMSWEEP_TRAINER_FRONTEND_JSON_EVENT_SINK_H_

#include <cstdio>

#include "normsweep/v1/train.pb.h"
#include "trainer/trainer.h"

namespace normsweep::trainer {

v1::TrainEvent ToProto(const StepEvent& e);
v1::TrainEvent ToProto(const EvalEvent& e);
v1::TrainEvent ToProto(const GradNormsEvent& e);
v1::TrainEvent ToProto(const FinalEvent& e);

class JsonLinesEventSink final : public EventSink {
 public:
  // fused_index >= 0: every event carries it (TrainEvent.fused_index; as
  // protobuf's JSON omits zeros, index 0 reads as absent). Several sinks may
  // share out from different threads: each line is one locked write.
  explicit JsonLinesEventSink(std::FILE* out, int fused_index = -1) : out_(out), fused_index_(fused_index) {}
  void OnStep(const StepEvent& e) override { Write(ToProto(e)); }
  void OnEval(const EvalEvent& e) override { Write(ToProto(e)); }
  void OnGradNorms(const GradNormsEvent& e) override { Write(ToProto(e)); }
  void OnFinal(const FinalEvent& e) override { Write(ToProto(e)); }

 private:
  void Write(const v1::TrainEvent& event);
  std::FILE* out_;
  int fused_index_;
};

}  // namespace normsweep::trainer

#endif  // NORMSWEEP_TRAINER_FRONTEND_JSON_EVENT_SINK_H_

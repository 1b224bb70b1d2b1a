// An EventSink that keeps every event a training run sends, for tests.
#ifndef NORMSWEEP_TESTS_TRAINER_RECORDING_SINK_H_
#define NORMSWEEP_TESTS_TRAINER_RECORDING_SINK_H_

#include <vector>

#include "trainer/trainer.h"

namespace normsweep::trainer {

class RecordingSink : public EventSink {
 public:
  void OnStep(const StepEvent& e) override { steps.push_back(e); }
  void OnEval(const EvalEvent& e) override { evals.push_back(e); }
  void OnGradNorms(const GradNormsEvent& e) override { grad_norms.push_back(e); }
  void OnFinal(const FinalEvent& e) override { finals.push_back(e); }
  std::vector<StepEvent> steps;
  std::vector<EvalEvent> evals;
  std::vector<GradNormsEvent> grad_norms;
  std::vector<FinalEvent> finals;
};

}  // namespace normsweep::trainer

#endif  // NORMSWEEP_TESTS_TRAINER_RECORDING_SINK_H_

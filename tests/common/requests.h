// The requests a worker sends about a trial it holds, addressed to its lease
// (worker, trial, attempt), for tests that play the worker. Header-only.
#ifndef NORMSWEEP_TESTS_COMMON_REQUESTS_H_
#define NORMSWEEP_TESTS_COMMON_REQUESTS_H_

#include <cstdint>
#include <string>

#include "normsweep/v1/worker_service.pb.h"

namespace normsweep::testing {

inline v1::ReportProgressRequest ProgressOf(int64_t worker, const v1::Trial& trial) {
  v1::ReportProgressRequest r;
  r.set_worker_id(worker);
  r.set_trial_id(trial.id());
  r.set_attempt(trial.attempts());
  return r;
}

inline v1::FinishTrialRequest FinishOf(int64_t worker, const v1::Trial& trial, v1::TrialState outcome) {
  v1::FinishTrialRequest r;
  r.set_worker_id(worker);
  r.set_trial_id(trial.id());
  r.set_attempt(trial.attempts());
  r.set_outcome(outcome);
  return r;
}

// One gradient norm of one layer's matrix ("ffn.fc1", "ffn.fc2") in g.
inline v1::LayerGradNorm* AddNorm(v1::LayerGradNorms* g, int layer, const std::string& matrix, double norm) {
  v1::LayerGradNorm* n = g->add_norms();
  n->set_layer(layer);
  n->set_matrix(matrix);
  n->set_norm(norm);
  return n;
}

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_COMMON_REQUESTS_H_

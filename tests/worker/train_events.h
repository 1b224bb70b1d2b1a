// Trainer events for the worker's tests and the fake trainer. Header-only.
#ifndef NORMSWEEP_TESTS_WORKER_TRAIN_EVENTS_H_
#define NORMSWEEP_TESTS_WORKER_TRAIN_EVENTS_H_

#include <functional>
#include <string>

#include "normsweep/v1/train.pb.h"

namespace normsweep::testing {

// A grad_norms event at `step`: W1 and W2 ("ffn.fc1", "ffn.fc2") of each of
// `layers` blocks, with norm(layer, matrix).
inline v1::TrainEvent GradNormsEvent(int step, int layers,
                                     const std::function<double(int, const std::string&)>& norm) {
  v1::TrainEvent g;
  g.set_type("grad_norms");
  g.set_step(step);
  for (int l = 0; l < layers; ++l) {
    for (const char* m : {"ffn.fc1", "ffn.fc2"}) {
      v1::LayerGradNorm* n = g.add_layer_grad_norms();
      n->set_layer(l);
      n->set_matrix(m);
      n->set_norm(norm(l, m));
    }
  }
  return g;
}

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_WORKER_TRAIN_EVENTS_H_

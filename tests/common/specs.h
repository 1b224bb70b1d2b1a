// The sweep specs the scheduler and store tests start from, so that each
// test says only what it changes. Header-only.
#ifndef NORMSWEEP_TESTS_COMMON_SPECS_H_
#define NORMSWEEP_TESTS_COMMON_SPECS_H_

#include <string>
#include <vector>

#include "normsweep/v1/sweep.pb.h"

namespace normsweep::testing {

// A small model (d_model 64, 4 heads, 100 steps), Post-LN and Pre-LN,
// warm-up 0; no lrs and no seeds yet.
inline v1::SweepSpec SmallSpec(const std::string& name) {
  v1::SweepSpec spec;
  spec.set_name(name);
  spec.mutable_base()->set_d_model(64);
  spec.mutable_base()->set_heads(4);
  spec.mutable_base()->set_steps(100);
  spec.add_placements("post");
  spec.add_placements("pre");
  spec.add_warmup_steps(0);
  return spec;
}

// SmallSpec searching each line's stability boundary between lr 1e-4 and
// 1e-1, with seeds 0 .. seeds-1 and initial_points coarse lrs (0: the
// default).
inline v1::SweepSpec BoundarySpec(const std::string& name, int seeds = 1, int initial_points = 0) {
  v1::SweepSpec spec = SmallSpec(name);
  for (int s = 0; s < seeds; ++s) spec.add_seeds(s);
  spec.mutable_boundary_search()->set_lr_min(1e-4);
  spec.mutable_boundary_search()->set_lr_max(1e-1);
  spec.mutable_boundary_search()->set_initial_points(initial_points);
  return spec;
}

// Adds an extra axis over `field` with these values; returns it.
inline v1::ExtraAxis* AddAxis(v1::SweepSpec* spec, const std::string& field, const std::vector<std::string>& values) {
  v1::ExtraAxis* axis = spec->add_extra_axes();
  axis->set_field(field);
  for (const std::string& v : values) axis->add_values(v);
  return axis;
}

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_COMMON_SPECS_H_

// The points of a progress request (requests.h's ProgressOf), for tests that
// play the worker. Header-only.
#ifndef NORMSWEEP_TESTS_COMMON_METRIC_POINTS_H_
#define NORMSWEEP_TESTS_COMMON_METRIC_POINTS_H_

#include "normsweep/v1/worker_service.pb.h"

namespace normsweep::testing {

// A new point of req at `step`, for the caller to fill in.
inline v1::MetricPoint* AddPoint(v1::ReportProgressRequest& req, int step) {
  v1::MetricPoint* p = req.add_points();
  p->set_step(step);
  return p;
}

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_COMMON_METRIC_POINTS_H_

// Learning-rate schedules (DESIGN.md "The trainer"). Step t counts from 1.
//   warm-up: lr(t) = peak * t / W for t <= W (W = 0: the first step uses peak)
//   then constant: peak; inverse_sqrt: peak * sqrt(max(W,1) / t);
//   linear: peak * (T - t) / (T - W), reaching 0 at the last step T;
//   cosine: peak * 0.5 * (1 + cos(pi * (t - W) / (T - W))).
#ifndef NORMSWEEP_TRAINER_SCHEDULE_H_
#define NORMSWEEP_TRAINER_SCHEDULE_H_

#include "trainer/settings/config.h"

namespace normsweep::trainer {

double LearningRate(const ScheduleConfig& schedule, int step);

}  // namespace normsweep::trainer

#endif  // NORMSWEEP_TRAINER_SCHEDULE_H_

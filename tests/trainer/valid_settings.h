// Valid(settings): a test's hand-made TrainSettings as the ValidTrainSettings
// RunTraining takes; invalid ones stop the test binary, naming the field
// (a test of the validation itself calls ValidTrainSettings::Check).
#ifndef NORMSWEEP_TESTS_TRAINER_VALID_SETTINGS_H_
#define NORMSWEEP_TESTS_TRAINER_VALID_SETTINGS_H_

#include <cstdio>
#include <cstdlib>

#include "trainer/settings/config.h"

namespace normsweep::trainer {

inline ValidTrainSettings Valid(const TrainSettings& settings) {
  StatusOr<ValidTrainSettings> valid = ValidTrainSettings::Check(settings);
  if (!valid.ok()) {
    std::fprintf(stderr, "invalid test settings: %s\n", valid.status().message().c_str());
    std::abort();
  }
  return *valid;
}

}  // namespace normsweep::trainer

#endif  // NORMSWEEP_TESTS_TRAINER_VALID_SETTINGS_H_

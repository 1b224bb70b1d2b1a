// Where the trainer's tests write files (corpora, checkpoints): a directory
// of the test process's own under the system's temporary directory, made on
// first use and left for the system to clean. Header-only.
#ifndef NORMSWEEP_TESTS_TRAINER_TEMP_PATH_H_
#define NORMSWEEP_TESTS_TRAINER_TEMP_PATH_H_

#include <unistd.h>

#include <filesystem>
#include <string>

namespace normsweep::trainer {

// The path of file `name` in that directory.
inline std::string TempPath(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("normsweep_trainer_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

}  // namespace normsweep::trainer

#endif  // NORMSWEEP_TESTS_TRAINER_TEMP_PATH_H_

// A whole file as a string ("" when it cannot be read), for tests that look
// at logs, pages and fixtures.
#ifndef NORMSWEEP_TESTS_COMMON_READ_FILE_H_
#define NORMSWEEP_TESTS_COMMON_READ_FILE_H_

#include <fstream>
#include <sstream>
#include <string>

namespace normsweep::testing {

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_COMMON_READ_FILE_H_

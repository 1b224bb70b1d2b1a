// A minimal HTTP/1.0 GET against 127.0.0.1, for scraping /metrics in tests.
#ifndef NORMSWEEP_TESTS_COMMON_HTTP_GET_H_
#define NORMSWEEP_TESTS_COMMON_HTTP_GET_H_

#include <string>

#include "absl/status/statusor.h"

namespace normsweep::testing {

// The response body of GET http://127.0.0.1:port/path (status 200 only).
absl::StatusOr<std::string> HttpGet(int port, const std::string& path);

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_COMMON_HTTP_GET_H_

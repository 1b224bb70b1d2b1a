// Throwaway certificates for TLS tests and the load generator, made with
// Debian's openssl command at run time (nothing secret is committed): a CA,
// a server certificate for localhost and 127.0.0.1, a client certificate,
// and a second CA with a client certificate of its own, which the first CA
// does not vouch for. EC P-256 keys, valid for two days.
#ifndef NORMSWEEP_TESTS_COMMON_TEST_CERTIFICATES_H_
#define NORMSWEEP_TESTS_COMMON_TEST_CERTIFICATES_H_

#include <string>

#include "absl/status/statusor.h"

namespace normsweep::testing {

struct TestCertificates {
  std::string ca;           // CA certificate (PEM file path)
  std::string server_cert;  // signed by ca; subjectAltName localhost, 127.0.0.1
  std::string server_key;
  std::string client_cert;  // signed by ca
  std::string client_key;
  std::string other_ca;           // an unrelated CA
  std::string other_client_cert;  // signed by other_ca
  std::string other_client_key;
};

// Writes them into dir (which must exist); openssl's output goes to
// dir/openssl.log.
absl::StatusOr<TestCertificates> MakeTestCertificates(const std::string& dir);

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_COMMON_TEST_CERTIFICATES_H_

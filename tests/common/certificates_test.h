// The certificates suite of the TLS tests: a test suite sharing one set of
// throwaway certificates (test_certificates.h) in certs_, made once in a
// temporary directory (dir_) that goes after the suite.
//   class MyTest : public testing::CertificatesTest {};
//   class MyServerTest : public testing::WithTestCertificates<testing::InProcessSchedulerTest> {};
#ifndef NORMSWEEP_TESTS_COMMON_CERTIFICATES_TEST_H_
#define NORMSWEEP_TESTS_COMMON_CERTIFICATES_TEST_H_

#include <stdlib.h>

#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "tests/common/test_certificates.h"

namespace normsweep::testing {

// Base: the fixture it extends.
template <typename Base = ::testing::Test>
class WithTestCertificates : public Base {
 protected:
  static void SetUpTestSuite() {
    char dir[] = "/tmp/normsweep-tls-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = new std::string(dir);
    auto certs = MakeTestCertificates(*dir_);
    ASSERT_TRUE(certs.ok()) << certs.status();
    certs_ = new TestCertificates(*certs);
  }
  static void TearDownTestSuite() {
    if (dir_ != nullptr) {
      std::error_code ec;
      std::filesystem::remove_all(*dir_, ec);
    }
    delete dir_;
    delete certs_;
    dir_ = nullptr;
    certs_ = nullptr;
  }

  inline static std::string* dir_ = nullptr;
  inline static TestCertificates* certs_ = nullptr;
};

using CertificatesTest = WithTestCertificates<>;

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_COMMON_CERTIFICATES_TEST_H_

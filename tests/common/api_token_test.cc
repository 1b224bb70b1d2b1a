// Where the API token comes from (the check itself is exercised over real
// gRPC in tests/scheduler/grpc_sweep_api_test.cc and grpc_worker_api_test.cc).
#include "common/api_token.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace normsweep {
namespace {

using ::testing::HasSubstr;

class ApiTokenEnvTest : public ::testing::Test {
 protected:
  void SetUp() override { Clear(); }
  void TearDown() override { Clear(); }
  static void Clear() {
    unsetenv("NORMSWEEP_API_TOKEN");
    unsetenv("NORMSWEEP_API_TOKEN_FILE");
  }
  std::string WriteFile(const std::string& content) {
    const std::string path = ::testing::TempDir() + "/token_" + std::to_string(::getpid()) + "_" +
                             std::to_string(files_++);
    std::ofstream(path) << content;
    return path;
  }
  int files_ = 0;
};

TEST_F(ApiTokenEnvTest, NoneSetMeansNoToken) {
  auto t = ApiTokenFromEnvironment();
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, "");
}

TEST_F(ApiTokenEnvTest, VariableWinsOverFileAndIsTrimmed) {
  setenv("NORMSWEEP_API_TOKEN", " s3cret\n", 1);
  setenv("NORMSWEEP_API_TOKEN_FILE", WriteFile("other").c_str(), 1);
  auto t = ApiTokenFromEnvironment();
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, "s3cret");
}

TEST_F(ApiTokenEnvTest, FileAsAMountedSecret) {
  setenv("NORMSWEEP_API_TOKEN_FILE", WriteFile("from-file\n").c_str(), 1);
  auto t = ApiTokenFromEnvironment();
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, "from-file");
}

TEST_F(ApiTokenEnvTest, MissingOrEmptyFileIsAnErrorNamingTheVariable) {
  setenv("NORMSWEEP_API_TOKEN_FILE", "/nonexistent/token", 1);
  auto missing = ApiTokenFromEnvironment();
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("NORMSWEEP_API_TOKEN_FILE"));
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("/nonexistent/token"));
  setenv("NORMSWEEP_API_TOKEN_FILE", WriteFile(" \n").c_str(), 1);
  auto empty = ApiTokenFromEnvironment();
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(std::string(empty.status().message()), HasSubstr("is empty"));
}

}  // namespace
}  // namespace normsweep

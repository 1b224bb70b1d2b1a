// The token roles file's format, its errors (each naming the line), the
// roles' order and the SHA-256 the file's hashes are checked with. Calls
// against a real server: tests/scheduler/token_roles_test.cc.
#include "common/token_roles.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"

namespace normsweep {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Error(const std::string& text) {
  absl::StatusOr<TokenRoles> roles = TokenRoles::Parse(text, "roles.txt");
  EXPECT_FALSE(roles.ok()) << text;
  if (roles.ok()) return "";
  EXPECT_EQ(roles.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(roles.status().message());
}

TEST(Sha256HexTest, KnownDigests) {
  // FIPS 180-2's example and the empty string.
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(TokenRolesTest, LinesCommentsAndCommonNames) {
  const std::string text = absl::StrCat(
      "# who may do what\n"
      "\n"
      "alice submit ", Sha256Hex("alice's token"), "   # the sweeps' owner\n",
      "  nb.reader\tread ", Sha256Hex("notebook"), "\n",
      // Upper-case hex reads as well.
      "worker-1 worker ", "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD", "\n",
      "ci@example read cn:normsweep test client\n");
  absl::StatusOr<TokenRoles> roles = TokenRoles::Parse(text, "roles.txt");
  ASSERT_TRUE(roles.ok()) << roles.status();
  EXPECT_EQ(roles->tokens(), 3);
  EXPECT_EQ(roles->common_names(), 1);
  const Caller* alice = roles->ForToken("alice's token");
  ASSERT_NE(alice, nullptr);
  EXPECT_EQ(alice->name, "alice");
  EXPECT_EQ(alice->role, Role::kSubmit);
  ASSERT_NE(roles->ForToken("notebook"), nullptr);
  EXPECT_EQ(roles->ForToken("notebook")->name, "nb.reader");
  EXPECT_EQ(roles->ForToken("notebook")->role, Role::kRead);
  ASSERT_NE(roles->ForToken("abc"), nullptr);
  EXPECT_EQ(roles->ForToken("abc")->role, Role::kWorker);
  EXPECT_EQ(roles->ForToken("ALICE'S TOKEN"), nullptr);
  EXPECT_EQ(roles->ForToken(Sha256Hex("alice's token")), nullptr);  // the hash itself is no token
  const Caller* ci = roles->ForCommonName("normsweep test client");
  ASSERT_NE(ci, nullptr);
  EXPECT_EQ(ci->name, "ci@example");
  EXPECT_EQ(ci->role, Role::kRead);
  EXPECT_EQ(roles->ForCommonName("normsweep test"), nullptr);
}

TEST(TokenRolesTest, AnEmptyFileHasNoCallers) {
  absl::StatusOr<TokenRoles> roles = TokenRoles::Parse("# nobody yet\n\n", "roles.txt");
  ASSERT_TRUE(roles.ok()) << roles.status();
  EXPECT_EQ(roles->tokens(), 0);
  EXPECT_EQ(roles->common_names(), 0);
}

TEST(TokenRolesTest, ErrorsNameTheLine) {
  const std::string hash = Sha256Hex("t");
  const std::string ok = absl::StrCat("alice read ", hash, "\n");
  EXPECT_THAT(Error(ok + "bob\n"), HasSubstr("roles.txt:2: expected NAME ROLE SHA256HEX or NAME ROLE cn:COMMON_NAME, "
                                             "got one field"));
  EXPECT_THAT(Error("# c\nbob read\n"), HasSubstr("roles.txt:2: expected NAME ROLE"));
  EXPECT_THAT(Error(absl::StrCat("\n\nbob admin ", Sha256Hex("u"))),
              HasSubstr("roles.txt:3: role 'admin' is not read, submit or worker"));
  EXPECT_THAT(Error(absl::StrCat("bob/x read ", Sha256Hex("u"))),
              HasSubstr("roles.txt:1: name 'bob/x' must be 1-64 letters, digits"));
  EXPECT_THAT(Error(ok + "carol worker cn:\n"), HasSubstr("roles.txt:2: cn: names no common name"));
  EXPECT_THAT(Error(ok + "carol read cn:a b\ndave read cn:a b\n"), HasSubstr("roles.txt:3: common name 'a b' appears twice"));
  EXPECT_THAT(Error(ok + absl::StrCat("bob submit ", hash, "\n")), HasSubstr("roles.txt:2: the token of 'bob' appears twice"));
  // A bad hash is not quoted: it may be the token itself, pasted by mistake.
  const std::string pasted = Error(ok + "bob submit my-secret-token\n");
  EXPECT_THAT(pasted, HasSubstr("roles.txt:2: the token of 'bob' is not 64 hex digits (a SHA-256) or cn:COMMON_NAME "
                                "(15 characters"));
  EXPECT_THAT(pasted, Not(HasSubstr("my-secret-token")));
  EXPECT_THAT(Error(absl::StrCat("bob read ", hash.substr(1), "g")), HasSubstr("roles.txt:1: the token of 'bob'"));
}

TEST(TokenRolesTest, LoadNamesAnUnreadableFile) {
  absl::StatusOr<TokenRoles> missing = TokenRoles::Load("/nonexistent/roles.txt");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("token roles file /nonexistent/roles.txt: cannot read"));
  const std::string path = ::testing::TempDir() + "/roles_" + std::to_string(::getpid());
  std::ofstream(path) << "bob read " << Sha256Hex("b") << "\nbob2 reader " << Sha256Hex("c") << "\n";
  absl::StatusOr<TokenRoles> bad = TokenRoles::Load(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr(path + ":2: role 'reader'"));
  unlink(path.c_str());
}

TEST(RolesTest, WhatEachRoleGrants) {
  for (Role needed : {Role::kRead, Role::kSubmit, Role::kWorker}) EXPECT_TRUE(RoleGrants(Role::kAll, needed));
  EXPECT_TRUE(RoleGrants(Role::kRead, Role::kRead));
  EXPECT_FALSE(RoleGrants(Role::kRead, Role::kSubmit));
  EXPECT_FALSE(RoleGrants(Role::kRead, Role::kWorker));
  EXPECT_TRUE(RoleGrants(Role::kSubmit, Role::kRead));
  EXPECT_TRUE(RoleGrants(Role::kSubmit, Role::kSubmit));
  EXPECT_FALSE(RoleGrants(Role::kSubmit, Role::kWorker));
  EXPECT_TRUE(RoleGrants(Role::kWorker, Role::kWorker));
  EXPECT_FALSE(RoleGrants(Role::kWorker, Role::kRead));
  EXPECT_FALSE(RoleGrants(Role::kWorker, Role::kSubmit));
  EXPECT_EQ(RoleForMethod("SubmitSweep"), Role::kSubmit);
  EXPECT_EQ(RoleForMethod("ExportSweep"), Role::kRead);
  EXPECT_EQ(RoleForMethod("StreamProgress"), Role::kWorker);
  EXPECT_EQ(RoleForMethod("DeleteEverything"), std::nullopt);
}

}  // namespace
}  // namespace normsweep

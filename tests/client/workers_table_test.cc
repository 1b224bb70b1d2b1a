#include "client/workers_table.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace normsweep::client {
namespace {

using ::testing::HasSubstr;

google::protobuf::RepeatedPtrField<std::string> Devices(std::initializer_list<const char*> names) {
  google::protobuf::RepeatedPtrField<std::string> out;
  for (const char* n : names) out.Add(n);
  return out;
}

TEST(WorkersTableTest, SummarisesDevicesByKind) {
  EXPECT_EQ(SummariseDevices(Devices({"cpu", "cpu"})), "2 x cpu");
  EXPECT_EQ(SummariseDevices(Devices({"cuda:0", "cuda:1", "cpu"})), "2 x cuda, 1 x cpu");
  EXPECT_EQ(SummariseDevices(Devices({})), "-");
}

TEST(WorkersTableTest, FormatsAges) {
  EXPECT_EQ(FormatAge(absl::Seconds(3)), "3s ago");
  EXPECT_EQ(FormatAge(absl::Seconds(245)), "4m05s ago");
  EXPECT_EQ(FormatAge(absl::Minutes(130)), "2h10m ago");
  EXPECT_EQ(FormatAge(absl::Hours(76)), "3d04h ago");
  EXPECT_EQ(FormatAge(-absl::Seconds(2)), "0s ago");  // clock skew
}

TEST(WorkersTableTest, ASupersededRegistrationSaysItWasRestarted) {
  v1::Worker old;
  old.set_id(4);
  old.set_name("box");
  old.set_superseded_by(9);
  EXPECT_THAT(RenderWorkersTable({old}, absl::FromUnixSeconds(1767225600)), HasSubstr(" no, restarted as 9 "));
}

TEST(WorkersTableTest, RendersOneRowPerWorker) {
  const absl::Time now = absl::FromUnixSeconds(1767225600);
  v1::Worker live, gone;
  live.set_id(1);
  live.set_name("gpu-box");
  live.set_hostname("node7");
  live.add_devices("cuda:0");
  live.add_devices("cuda:1");
  live.set_live(true);
  live.set_running_trials(2);
  live.mutable_last_heartbeat_at()->set_seconds(absl::ToUnixSeconds(now) - 3);
  gone.set_id(2);
  gone.set_name("laptop");
  gone.add_devices("cpu");
  gone.mutable_last_heartbeat_at()->set_seconds(absl::ToUnixSeconds(now) - 600);
  const std::string table = RenderWorkersTable({live, gone}, now);
  std::vector<std::string> lines;
  for (size_t start = 0, end; (end = table.find('\n', start)) != std::string::npos; start = end + 1) {
    lines.push_back(table.substr(start, end - start));
  }
  ASSERT_EQ(lines.size(), 3u) << table;
  EXPECT_THAT(lines[0], HasSubstr("last heartbeat"));
  EXPECT_THAT(lines[1], HasSubstr("gpu-box"));
  EXPECT_THAT(lines[1], HasSubstr("node7"));
  EXPECT_THAT(lines[1], HasSubstr("2 x cuda"));
  EXPECT_THAT(lines[1], HasSubstr(" yes "));
  EXPECT_THAT(lines[1], HasSubstr("3s ago"));
  EXPECT_THAT(lines[2], HasSubstr("laptop"));
  EXPECT_THAT(lines[2], HasSubstr("1 x cpu"));
  EXPECT_THAT(lines[2], HasSubstr(" no "));
  EXPECT_THAT(lines[2], HasSubstr("10m00s ago"));
}

}  // namespace
}  // namespace normsweep::client

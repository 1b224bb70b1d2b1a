// Reading the OOM killer's count: the worker's cgroup v2 memory.events path
// from /proc/self/cgroup, and its oom_kill line, from files in a temp dir.
#include "worker/memory_events.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace normsweep::worker {
namespace {

TEST(MemoryEventsPathOfTest, TheCgroupV2LineNamesTheFile) {
  EXPECT_EQ(MemoryEventsPathOf("0::/system.slice/normsweep-worker.service\n"),
            "/sys/fs/cgroup/system.slice/normsweep-worker.service/memory.events");
  // A hybrid hierarchy: the v1 lines come first.
  EXPECT_EQ(MemoryEventsPathOf("4:memory:/docker/abc\n1:cpu:/\n0::/docker/abc\n"),
            "/sys/fs/cgroup/docker/abc/memory.events");
  // A container's own namespace: its cgroup is the root.
  EXPECT_EQ(MemoryEventsPathOf("0::/\n"), "/sys/fs/cgroup/memory.events");
  EXPECT_EQ(MemoryEventsPathOf("4:memory:/docker/abc\n1:cpu:/\n"), "");  // cgroup v1 only: cannot tell
  EXPECT_EQ(MemoryEventsPathOf(""), "");
  EXPECT_EQ(MemoryEventsPathOf("0::relative\n"), "");
}

class ReadOomKillsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = absl::StrCat(::testing::TempDir(), "/memory_events_test_", getpid(), "_",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { std::filesystem::remove(path_); }
  void Write(const std::string& text) { std::ofstream(path_, std::ios::trunc) << text; }
  std::string path_;
};

TEST_F(ReadOomKillsTest, TheOomKillLineNotTheOthers) {
  Write("low 0\nhigh 12\nmax 3\noom 2\noom_kill 1\noom_group_kill 7\n");
  EXPECT_EQ(ReadOomKills(path_), 1);
  Write("oom_group_kill 7\noom_kill 40\n");
  EXPECT_EQ(ReadOomKills(path_), 40);
}

TEST_F(ReadOomKillsTest, UnknownWhenTheCountCannotBeRead) {
  EXPECT_EQ(ReadOomKills(""), std::nullopt);
  EXPECT_EQ(ReadOomKills(path_), std::nullopt);  // no such file
  Write("low 0\noom 2\n");                        // no oom_kill line
  EXPECT_EQ(ReadOomKills(path_), std::nullopt);
  Write("oom_kill many\n");
  EXPECT_EQ(ReadOomKills(path_), std::nullopt);
}

TEST(OomKillsGrewTest, OnlyAKnownGrowth) {
  EXPECT_TRUE(OomKillsGrew(3, 4));
  EXPECT_FALSE(OomKillsGrew(3, 3));
  EXPECT_FALSE(OomKillsGrew(std::nullopt, 4));
  EXPECT_FALSE(OomKillsGrew(3, std::nullopt));
}

TEST(DefaultMemoryEventsFileTest, EmptyOrAnExistingFile) {
  const std::string path = DefaultMemoryEventsFile();
  if (!path.empty()) EXPECT_TRUE(std::filesystem::exists(path)) << path;
}

}  // namespace
}  // namespace normsweep::worker

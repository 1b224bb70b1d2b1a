// GroupRunner: every submitted item is run once and answered; items sharing
// a key never run in one group or in two groups at once; queued items are
// run before the destructor returns.
#include "db/group_runner.h"

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace normsweep::db {
namespace {

struct Item {
  int64_t key = 0;
  std::function<void()> done;
};

TEST(GroupRunnerTest, RunsEveryItemOnceAndKeepsKeysApart) {
  std::mutex mu;
  std::map<int64_t, int> running;  // key -> groups running it now
  int overlaps = 0, same_group = 0, max_group = 0;
  std::atomic<int> ran{0};
  {
    GroupRunner<Item> runner(
        3, 8,
        [&](std::vector<Item*>& group) {
          {
            std::lock_guard<std::mutex> lock(mu);
            std::map<int64_t, int> in_group;
            for (Item* item : group) {
              if (item->key != 0 && ++in_group[item->key] > 1) ++same_group;
              if (item->key != 0 && running[item->key]++ > 0) ++overlaps;
            }
            max_group = std::max(max_group, static_cast<int>(group.size()));
          }
          std::this_thread::sleep_for(std::chrono::microseconds(200));
          {
            std::lock_guard<std::mutex> lock(mu);
            for (Item* item : group) {
              if (item->key != 0) --running[item->key];
            }
          }
          for (Item* item : group) item->done();
        },
        [](const Item& item) { return item.key; });
    std::vector<std::thread> callers;
    for (int c = 0; c < 8; ++c) {
      callers.emplace_back([&, c] {
        for (int i = 0; i < 100; ++i) {
          auto item = std::make_unique<Item>();
          item->key = (c * 100 + i) % 5;  // 0 (no key) and four shared keys
          item->done = [&] { ran.fetch_add(1); };
          runner.Submit(std::move(item));
        }
      });
    }
    for (std::thread& t : callers) t.join();
  }  // the destructor runs what is still queued
  EXPECT_EQ(ran.load(), 800);
  EXPECT_EQ(overlaps, 0);
  EXPECT_EQ(same_group, 0);
  EXPECT_LE(max_group, 8);
}

TEST(GroupRunnerTest, CallersWaitingTogetherShareAGroup) {
  absl::Notification release;
  std::atomic<int> groups{0};
  std::atomic<int> done{0};
  std::atomic<size_t> largest{0};
  GroupRunner<Item> runner(
      1, 64,
      [&](std::vector<Item*>& group) {
        if (groups.fetch_add(1) == 0) release.WaitForNotification();  // hold the first group
        largest = std::max(largest.load(), group.size());
        for (Item* item : group) item->done();
      },
      [](const Item&) { return int64_t{0}; });
  auto submit = [&] {
    auto item = std::make_unique<Item>();
    item->done = [&] { done.fetch_add(1); };
    runner.Submit(std::move(item));
  };
  submit();
  while (groups.load() == 0) std::this_thread::yield();
  for (int i = 0; i < 20; ++i) submit();  // queue up behind the running group
  release.Notify();
  while (done.load() < 21) std::this_thread::yield();
  EXPECT_EQ(groups.load(), 2);
  EXPECT_EQ(largest.load(), 20u);
}

}  // namespace
}  // namespace normsweep::db

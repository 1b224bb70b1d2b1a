// Runs concurrent callers' requests in groups ("group commit"): each caller
// queues its item; whichever caller finds a free leader slot takes the queued
// items (up to max_batch) and runs them together in one database statement,
// while later callers queue up behind it for the next group. No timers: under
// light load a group is one item; under heavy load groups grow by themselves.
//
// Items sharing a non-zero key never run in the same or in concurrent groups
// (one statement must not touch a row twice, and two groups must not lock
// the same rows in different orders).
//
// Thread-safe: mu_ guards the queue, the leader count and the keys in flight.
#ifndef NORMSWEEP_DB_GROUP_RUNNER_H_
#define NORMSWEEP_DB_GROUP_RUNNER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <set>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace normsweep::db {

template <typename Item>
class GroupRunner {
 public:
  // run(group) must fill in every item's result; key(item) is 0 for "no key".
  GroupRunner(int max_leaders, size_t max_batch, std::function<void(std::vector<Item*>&)> run,
              std::function<int64_t(const Item&)> key)
      : max_leaders_(max_leaders), max_batch_(max_batch), run_(std::move(run)), key_(std::move(key)) {}

  // Returns once item has been run (by this thread or another).
  void Run(Item* item) {
    Entry entry{item};
    absl::MutexLock lock(&mu_);
    queue_.push_back(&entry);
    while (!entry.done) {
      std::vector<Entry*> group = leaders_ < max_leaders_ ? TakeGroup() : std::vector<Entry*>();
      if (group.empty()) {
        auto can_act = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return entry.done || (leaders_ < max_leaders_ && Runnable());
        };
        mu_.Await(absl::Condition(&can_act));
        continue;
      }
      ++leaders_;
      std::vector<Item*> items;
      for (Entry* e : group) items.push_back(e->item);
      mu_.Unlock();
      run_(items);
      mu_.Lock();
      for (Entry* e : group) {
        if (int64_t k = key_(*e->item); k != 0) keys_.erase(k);
        e->done = true;
      }
      --leaders_;
    }
  }

 private:
  struct Entry {
    Item* item;
    bool done = false;
  };

  bool Runnable() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const Entry* e : queue_) {
      int64_t k = key_(*e->item);
      if (k == 0 || !keys_.contains(k)) return true;
    }
    return false;
  }

  std::vector<Entry*> TakeGroup() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<Entry*> group;
    for (auto it = queue_.begin(); it != queue_.end() && group.size() < max_batch_;) {
      int64_t k = key_(*(*it)->item);
      if (k != 0 && keys_.contains(k)) {
        ++it;
        continue;
      }
      if (k != 0) keys_.insert(k);
      group.push_back(*it);
      it = queue_.erase(it);
    }
    return group;
  }

  const int max_leaders_;
  const size_t max_batch_;
  const std::function<void(std::vector<Item*>&)> run_;
  const std::function<int64_t(const Item&)> key_;
  absl::Mutex mu_;
  std::deque<Entry*> queue_ ABSL_GUARDED_BY(mu_);
  std::set<int64_t> keys_ ABSL_GUARDED_BY(mu_);
  int leaders_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace normsweep::db

#endif  // NORMSWEEP_DB_GROUP_RUNNER_H_

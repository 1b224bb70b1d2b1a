// Runs concurrent callers' requests in groups ("group commit"): each caller
// queues its item; while fewer than max_leaders groups run, the first queued
// caller is made leader, takes the queued items (up to max_batch) and runs
// them together in one database statement, while later callers queue up for
// the next group. No timers: under light load a group is one item; under
// heavy load groups grow by themselves.
//
// Items sharing a non-zero key never run in the same or in concurrent groups
// (one statement must not touch a row twice, and two groups must not lock
// the same rows in different orders).
//
// Thread-safe: mu_ guards the queue, the leader count, the keys in flight
// and every Entry's flags. Each waiting caller sleeps on its own condition
// variable and is woken only when its item is done or it is made leader.
#ifndef NORMSWEEP_DB_GROUP_RUNNER_H_
#define NORMSWEEP_DB_GROUP_RUNNER_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <vector>

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
    std::unique_lock<std::mutex> lock(mu_);
    queue_.push_back(&entry);
    PromoteLocked();
    while (true) {
      if (entry.lead) {
        entry.lead = false;
        std::vector<Entry*> group = TakeGroupLocked();
        if (!group.empty()) {
          std::vector<Item*> items;
          for (Entry* e : group) items.push_back(e->item);
          lock.unlock();
          run_(items);
          lock.lock();
          for (Entry* e : group) {
            if (int64_t k = key_(*e->item); k != 0) keys_.erase(k);
            e->done = true;
            if (e != &entry) e->cv.notify_one();
          }
        }
        --leaders_;
        PromoteLocked();
        continue;
      }
      if (entry.done) return;
      entry.cv.wait(lock);
    }
  }

 private:
  struct Entry {
    Item* item;
    bool done = false;
    bool lead = false;
    std::condition_variable cv;
  };

  bool RunnableLocked(const Entry* e) const { int64_t k = key_(*e->item); return k == 0 || !keys_.contains(k); }

  // Hands free leader slots to the first runnable queued callers.
  void PromoteLocked() {
    for (auto it = queue_.begin(); it != queue_.end() && leaders_ < max_leaders_; ++it) {
      Entry* e = *it;
      if (e->lead || !RunnableLocked(e)) continue;
      e->lead = true;
      ++leaders_;
      e->cv.notify_one();
    }
  }

  std::vector<Entry*> TakeGroupLocked() {
    std::vector<Entry*> group;
    for (auto it = queue_.begin(); it != queue_.end() && group.size() < max_batch_;) {
      Entry* e = *it;
      if (!RunnableLocked(e)) {
        ++it;
        continue;
      }
      if (int64_t k = key_(*e->item); k != 0) keys_.insert(k);
      if (e->lead) {  // promoted but taken into this group: give its slot back
        e->lead = false;
        --leaders_;
      }
      group.push_back(e);
      it = queue_.erase(it);
    }
    return group;
  }

  const int max_leaders_;
  const size_t max_batch_;
  const std::function<void(std::vector<Item*>&)> run_;
  const std::function<int64_t(const Item&)> key_;
  std::mutex mu_;
  std::deque<Entry*> queue_;
  std::set<int64_t> keys_;
  int leaders_ = 0;
};

}  // namespace normsweep::db

#endif  // NORMSWEEP_DB_GROUP_RUNNER_H_

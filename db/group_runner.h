// Runs callers' requests in groups ("group commit") on threads of its own:
// Submit() queues an item and returns at once; each of the runner's threads
// takes the queued items (up to max_batch) and runs them together in one
// database statement, while later items queue up for the next group. No
// timers: under light load a group is one item; under heavy load groups grow
// by themselves. run(group) completes every item (its callback answers the
// caller), so a gRPC callback handler can hand its request over without
// blocking, and the answers of a whole group go out from the runner's thread
// without waking one thread per call.
//
// Items sharing a non-zero key never run in the same or in concurrent groups
// (one statement must not touch a row twice, and two groups must not lock
// the same rows in different orders).
//
// Thread-safe: mu_ guards the queue, the keys in flight and stopping_. The
// destructor runs what is still queued, then joins the threads.
#ifndef NORMSWEEP_DB_GROUP_RUNNER_H_
#define NORMSWEEP_DB_GROUP_RUNNER_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace normsweep::db {

template <typename Item>
class GroupRunner {
 public:
  // run(group) must complete every item; key(item) is 0 for "no key".
  GroupRunner(int threads, size_t max_batch, std::function<void(std::vector<Item*>&)> run,
              std::function<int64_t(const Item&)> key)
      : max_batch_(max_batch), run_(std::move(run)), key_(std::move(key)) {
    for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { Loop(); });
  }
  ~GroupRunner() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  GroupRunner(const GroupRunner&) = delete;
  GroupRunner& operator=(const GroupRunner&) = delete;

  // Queues item; a runner thread runs it and deletes it afterwards.
  void Submit(std::unique_ptr<Item> item) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(item));
    }
    cv_.notify_one();
  }

 private:
  bool RunnableLocked(const Item& item) const {
    const int64_t k = key_(item);
    return k == 0 || !keys_.contains(k);
  }

  bool AnyRunnableLocked() const {
    for (const auto& item : queue_) {
      if (RunnableLocked(*item)) return true;
    }
    return false;
  }

  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return AnyRunnableLocked() || (stopping_ && queue_.empty()); });
      if (queue_.empty()) return;  // stopping, nothing left
      std::vector<std::unique_ptr<Item>> group;
      for (auto it = queue_.begin(); it != queue_.end() && group.size() < max_batch_;) {
        if (!RunnableLocked(**it)) {
          ++it;
          continue;
        }
        if (int64_t k = key_(**it); k != 0) keys_.insert(k);
        group.push_back(std::move(*it));
        it = queue_.erase(it);
      }
      std::vector<int64_t> keys;
      for (const auto& item : group) {
        if (int64_t k = key_(*item); k != 0) keys.push_back(k);
      }
      lock.unlock();
      std::vector<Item*> items;
      items.reserve(group.size());
      for (auto& item : group) items.push_back(item.get());
      run_(items);
      group.clear();
      lock.lock();
      for (int64_t k : keys) keys_.erase(k);
      // Items held back by these keys may run now, on another thread.
      if (!keys.empty() && !queue_.empty()) cv_.notify_all();
    }
  }

  const size_t max_batch_;
  const std::function<void(std::vector<Item*>&)> run_;
  const std::function<int64_t(const Item&)> key_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Item>> queue_;
  std::set<int64_t> keys_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;  // last: started after the fields above
};

}  // namespace normsweep::db

#endif  // NORMSWEEP_DB_GROUP_RUNNER_H_

// For tests: a KeyValueStore in memory, shared by the "ranks" of one test
// (threads or objects in one process), with the real store's contract: get
// waits up to its timeout for another rank's set, then throws PeerLost naming
// the key.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

#include "distributed/collective.h"
#include "distributed/key_value.h"

namespace pronghorn::distributed::testing {

class InMemoryStore final : public KeyValueStore {
 public:
  void set(const std::string& key, const std::string& value) override {
    {
      std::lock_guard lock(mutex_);
      values_[key] = value;
    }
    changed_.notify_all();
  }

  std::string get(const std::string& key, std::chrono::milliseconds timeout) override {
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, timeout, [&] { return values_.contains(key); })) {
      throw PeerLost("store key \"" + key + "\" was not set within " +
                     std::to_string(timeout.count()) + " ms");
    }
    return values_.at(key);
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
};

}  // namespace pronghorn::distributed::testing

// The rendezvous store as the collectives see it (docs/architecture.md §2):
// rank 0 hosts it (a c10d TCPStore, rendezvous.h), every rank reads and
// writes keys already prefixed per run and per attempt. NCCL's unique id
// travels through it. An interface of its own so that code which must not
// include LibTorch (nccl_collective.cpp) and tests (an in-memory fake) can use
// it.
#pragma once

#include <chrono>
#include <string>

namespace pronghorn::distributed {

class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  // The value of `key`, waiting up to `timeout` for another rank to set it;
  // throws PeerLost (collective.h) naming the key when it does not come.
  virtual std::string get(const std::string& key, std::chrono::milliseconds timeout) = 0;
};

}  // namespace pronghorn::distributed

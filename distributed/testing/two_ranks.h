// Test helpers: the ranks of one job as threads of the test process, each
// with its own Rendezvous connection to rank 0's store on 127.0.0.1.
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>

#include "distributed/rendezvous.h"

namespace pronghorn::distributed::testing {

inline RendezvousOptions rank_options(int rank, int world, int port, std::string token = "t0k3n",
                                      std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  RendezvousOptions o;
  o.rank = rank;
  o.world_size = world;
  o.host = "127.0.0.1";
  o.port = port;
  o.run_name = "test-run";
  o.token = [token] { return token; };
  o.rendezvous_timeout = timeout;
  o.timeout = timeout;
  return o;
}

// Starts rank 0 on a free port in a thread; returns the port once it
// listens, and rank 0's Rendezvous (or its exception) through `rank0`.
inline int start_rank0(RendezvousOptions o, std::future<std::unique_ptr<Rendezvous>>& rank0) {
  auto listening = std::make_shared<std::promise<int>>();
  std::future<int> port = listening->get_future();
  o.port = 0;
  o.on_listening = [listening](int p) { listening->set_value(p); };
  rank0 = std::async(std::launch::async, [o] { return std::make_unique<Rendezvous>(o); });
  if (port.wait_for(std::chrono::seconds(10)) != std::future_status::ready) return -1;
  return port.get();
}

}  // namespace pronghorn::distributed::testing

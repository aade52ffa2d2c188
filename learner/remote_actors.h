// Actor-only nodes feeding this learner's ring over the network
// (remote/actor_gateway.h implements it): the loop's view of them, so the
// learner itself knows no network. Threads: the learner's loop.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "buffer/ring.h"
#include "buffer/weight_slab.h"
#include "proto/pronghorn.pb.h"

namespace pronghorn::learner {

class RemoteActors {
 public:
  virtual ~RemoteActors() = default;
  // Every node that joined, ended sessions included.
  virtual std::vector<v1::RemoteNode> nodes() = 0;
  // Asks node `name` for `processes` actor processes; false when no node of
  // that name joined.
  virtual bool scale(const std::string& name, int processes) = 0;
  // The job is over: tells every node so (they exit 0), waiting a moment
  // for them to hear it.
  virtual void end_job() = 0;
  // Unrolls committed to the ring from every node.
  virtual uint64_t committed() const = 0;
  // HOST:PORT where nodes join (the port bound).
  virtual std::string address() const = 0;
};

// Makes the learner's RemoteActors once its ring and slab exist (the slab
// holding the first weights) and its resolved config is on disk: `config_toml`.
using RemoteActorsFactory = std::function<std::unique_ptr<RemoteActors>(
    buffer::Ring& ring, const buffer::WeightSlab& slab, const std::string& config_toml)>;

}  // namespace pronghorn::learner

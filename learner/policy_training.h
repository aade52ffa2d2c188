// The policy under training and its published copy: the Trainer (model,
// optimizer, learner step; learner/trainer.h) and the weight slab the actors
// read (buffer/weight_slab.h). Publication is one function: the model's flat
// parameters → the slab's next version. A checkpoint's state is taken and
// restored here, so the loop never handles parameters itself.
// Threads: one (the learner's loop).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "buffer/weight_slab.h"
#include "core/config.h"
#include "core/env_spec.h"
#include "learner/checkpoint.h"
#include "learner/trainer.h"

namespace pronghorn::learner {

class PolicyTraining {
 public:
  // Builds the model and optimizer of `config` for `spec`.
  PolicyTraining(const Config& config, const EnvSpec& spec);
  // Creates the slab `slab_name` (shared memory of this learner) sized for
  // the parameters; before any other call below. Apart from the constructor
  // so that the learner creates its ring first: the larger segment is the
  // one a nearly full /dev/shm refuses, with all of its free room counted.
  void create_slab(const std::string& slab_name);

  Trainer& trainer() { return trainer_; }
  const buffer::WeightSlab& slab() const { return *slab_; }
  const std::string& slab_name() const { return slab_name_; }

  // The model's parameters (and observation statistics) as the slab's next
  // version; returns it.
  uint64_t publish();
  uint64_t version() const { return version_; }
  // A resumed (or rank 0's) run's version: the next publish() is version + 1.
  void set_version(uint64_t version) { slab_->set_version(version); }

  // The state a checkpoint holds, of the policy version last published.
  Checkpoint snapshot(uint64_t env_steps, uint64_t learner_steps, uint64_t episodes);

 private:
  Trainer trainer_;
  std::string slab_name_;
  std::unique_ptr<buffer::WeightSlab> slab_;
  std::vector<float> flat_;           // the parameters and observation statistics, as published
  ObservationStats published_stats_;  // their float64 original (model.normalize_observations)
  uint64_t version_ = 0;
};

}  // namespace pronghorn::learner

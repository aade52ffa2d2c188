// `pronghorn train --resume`: the learner's state from the newest checkpoint
// of the run that is whole and fits this run (docs/architecture.md §6).
//
// Candidates are tried newest first (learner/checkpoint.h orders them). One
// is taken only when its file reads back (a regular file, checksum, sane
// counters, finite parameters), its parameters are the model's (count, and
// names and shapes when it names them: learner/checkpoint_model.h), its
// optimizer state loads into an optimizer like the run's with every tensor
// shaped as its parameter and finite, and its RNG state is one this
// LibTorch's CPU generator accepts. All of that is checked on scratch copies
// before the Trainer is touched; a candidate that fails any of it, or fails
// while being applied, is skipped with a warning naming the file and why,
// and the next older one is tried.
// Threads: the learner's, before training starts.
#pragma once

#include <cstdint>
#include <string>

#include "core/config.h"
#include "learner/run_counters.h"

namespace pronghorn::learner {

class Trainer;

// What a resume restored besides the Trainer's weights and optimizer and the
// CPU generator: the counters to continue from.
struct ResumePoint {
  std::string path;  // the checkpoint file taken
  RunCounters counters;
};

// Restores `trainer` (built from `config`) and the default CPU generator
// from the newest valid checkpoint in `folder`. Throws Error naming the
// folder and each file's reason when none is valid, or none is there.
ResumePoint resume_from_checkpoints(const std::string& folder, Trainer& trainer,
                                    const Config& config);

}  // namespace pronghorn::learner

// Checkpoints of a run (DESIGN.md §6): model parameters, optimizer state,
// counters, policy version and the learner's RNG state, in one file
// `checkpoints/step-<learner_steps>.ckpt` with a checksum. Written
// atomically (temporary file, fsync, rename, fsync of the folder); the
// newest `keep` are kept. Loading skips, with a warning, any file that is
// truncated or fails its checksum, and takes the newest valid one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pronghorn::learner {

struct Checkpoint {
  uint64_t env_steps = 0;
  uint64_t learner_steps = 0;
  uint64_t episodes = 0;
  uint64_t policy_version = 0;
  std::vector<float> parameters;  // the model's flat parameter vector
  std::string optimizer;          // LibTorch-serialised optimizer state
  std::string rng;                // the learner's RNG state bytes
};

// Writes `checkpoint` into `folder` (created if missing); returns its path.
std::string save_checkpoint(const std::string& folder, const Checkpoint& checkpoint, int keep);

// The checkpoint at `path`; throws Error naming the file and what is wrong.
Checkpoint load_checkpoint(const std::string& path);

// The newest valid checkpoint in `folder`, or nothing when there is none.
std::optional<Checkpoint> load_newest_checkpoint(const std::string& folder,
                                                 std::string* path = nullptr);

}  // namespace pronghorn::learner

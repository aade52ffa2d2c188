// Checkpoints of a run (docs/architecture.md §6): model parameters by name,
// optimizer state, the run's counters and the learner's RNG state, in one
// file `checkpoints/env-steps-<env_steps, 20 digits>.ckpt` of named sections
// with a checksum (learner/checkpoint_format.h: the bytes, and which formats
// are read), so names sort as their progress does (`ls | tail -1` is the
// newest). Written atomically (temporary file, fsync, rename, fsync of the
// folder); the newest `keep` are kept. Files of the earlier naming,
// `step-<learner_steps>.ckpt`, still load and count as older than any file
// of the current one.
//
// Reading trusts nothing in a folder: only regular files are opened (never a
// FIFO, a device or a directory, and without blocking), every read is bounded
// by the file's size and the header's, and a file whose checksum holds must
// still carry sane, consistent counters and finite parameters. What the
// checkpoint must match in the run (parameter names and shapes, optimizer,
// RNG) is learner/resume.h's and learner/checkpoint_model.h's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "learner/return_scaling.h"
#include "learner/run_counters.h"
#include "model/observation_norm.h"

namespace pronghorn::learner {

// One parameter tensor as a checkpoint names it: its name in the model
// (LibTorch's, "torso.0.weight") and its shape. Its floats are the next
// product(shape) of Checkpoint::parameters.
struct NamedShape {
  std::string name;
  std::vector<int64_t> shape;
  bool operator==(const NamedShape&) const = default;
};

struct Checkpoint {
  RunCounters counters;
  std::vector<float> parameters;  // the model's flat parameter vector, in registration order
  // Each parameter tensor's name and shape, in the same order, covering
  // `parameters` exactly; empty when read from a format-1 file (no names).
  std::vector<NamedShape> parameter_layout;
  std::string optimizer;  // LibTorch-serialised optimizer state
  std::string rng;        // the learner's RNG state bytes
  // loss.return_scaling's statistics (learner/return_scaling.h); none when
  // the run does not scale returns, or the file predates them.
  std::optional<ReturnStats> return_stats;
  // model.normalize_observations' statistics (model/observation_norm.h), of
  // the same policy version as `parameters`; none when the run does not
  // normalise, or the file predates them (then none are applied).
  std::optional<ObservationStats> observation_stats;
};

// Bytes read from one checkpoint file unless the caller knows better (a
// resume bounds it by the model's size).
inline constexpr uint64_t kMaxCheckpointBytes = uint64_t{8} << 30;

// Counters above this are not a run's (run.total_steps is at most 9e18).
inline constexpr uint64_t kMaxCounter = uint64_t{1} << 63;

// "env-steps-00000000000001234560.ckpt": the name of a checkpoint at `env_steps`.
std::string checkpoint_file_name(uint64_t env_steps);

// The best policy's checkpoint in a run's checkpoints/ (learner/evaluator.h):
// a checkpoint like the others, whose name the pruning below and a resume
// never take for one of the last N.
inline constexpr const char* kBestCheckpointName = "best.ckpt";

// Writes `checkpoint` to `path` atomically (its folder must exist), in the
// current format; its parameter_layout must cover its parameters.
void write_checkpoint_file(const std::string& path, const Checkpoint& checkpoint);

// Writes `checkpoint` into `folder` (created if missing); returns its path.
// Then removes the oldest regular checkpoint files beyond `keep`, never the
// one just written and never one named newer than it (a resume that skipped
// a bad newest file writes older names for a while).
std::string save_checkpoint(const std::string& folder, const Checkpoint& checkpoint, int keep);

// Every entry of `folder` named like a checkpoint, whatever it is (a file, a
// FIFO, a directory, a link), newest first by the number in its name; files
// of the earlier naming after all of the current one. Empty when the folder
// cannot be read.
std::vector<std::string> checkpoint_candidates(const std::string& folder);

// The checkpoint at `path`, or nothing with `why` set to what is wrong with
// it (without the path). Reads at most `max_bytes`; never blocks.
std::optional<Checkpoint> read_checkpoint(const std::string& path, std::string* why,
                                          uint64_t max_bytes = kMaxCheckpointBytes);

// The checkpoint at `path`; throws Error naming the file and what is wrong.
Checkpoint load_checkpoint(const std::string& path);

// The newest checkpoint in `folder` that read_checkpoint() accepts, or
// nothing when there is none; each one skipped is logged with its reason.
std::optional<Checkpoint> load_newest_checkpoint(const std::string& folder,
                                                 std::string* path = nullptr);

}  // namespace pronghorn::learner

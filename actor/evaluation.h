// Evaluation of a policy (docs/architecture.md §4): N episodes on envs of
// its own, never the actors', with the greedy policy (the most likely action,
// or the Gaussian's mean) or sampled actions, through the actors' acting
// loop (actor/acting.h). One function for the learner's periodic evaluation
// (an evaluation process: learner/evaluator.h) and `pronghorn eval`, so the
// two give the same numbers for the same weights and seed.
//
// Episodes: K = min(N, 32) envs step as one batch, and the N episodes
// counted are the first N to start (taking whichever episodes end first
// would favour the short ones): an env whose counted episode ends starts
// the next counted one at once, while fewer than N have started. Same
// weights, config and seed: same returns (greedy), whatever the thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "model/policy.h"

namespace pronghorn::actor {

struct Evaluation {
  std::vector<double> returns;                 // one per episode, in the order they ended
  std::vector<int32_t> lengths;                // their lengths in env steps (not sent by the
                                               // evaluation process)
  double mean = 0, std = 0, min = 0, max = 0;  // of returns (std: population)
  uint64_t env_steps = 0;                      // stepped, all K envs counted
  bool cancelled = false;                      // `cancel` was set: returns are partial
};

// Sets mean, std, min and max from `e.returns` (zeros when there are none).
void summarise(Evaluation& e);

// The envs' seed for run.seed: the same at every evaluation of a run (so
// evaluations differ only by their weights), and apart from every actor's
// env seeds (actor/actor.cpp: seed * 100003 + 7 * stream + 1).
inline uint64_t evaluation_seed(uint64_t run_seed) { return run_seed * 100003 + 5; }

// An evaluation as text, for the evaluation process to send to the learner
// (learner/evaluation_process.h): "env_steps N", "cancelled 0|1", then one "return R" per episode,
// exactly (17 significant digits). parse_evaluation() throws Error on text
// not of this form, and summarises what it read.
std::string format_evaluation(const Evaluation& e);
Evaluation parse_evaluation(const std::string& text);

// How many envs an evaluation of `episodes` episodes steps at once.
inline int64_t evaluation_envs(int64_t episodes) { return std::clamp<int64_t>(episodes, 1, 32); }

class ActingLoop;

// The acting loop an evaluation steps: the env `env_config` names, seeded
// `seed`, acting with `model` through the policy face (model.fast_path =
// `fast_path`), the fused sampler seeded by one draw from LibTorch's default
// generator (the caller seeds it). evaluate_policy() and `pronghorn eval
// --video` (tools/eval_video.h) both step one.
std::unique_ptr<ActingLoop> evaluation_loop(PolicyNet& model, const EnvConfig& env_config,
                                            uint64_t seed, ModelConfig::FastPath fast_path);

// Runs `model` (on the CPU) for `episodes` episodes of the env `env_config`
// names, seeded with `seed`, through the policy face (model/policy_face.h;
// model.fast_path = `fast_path`). Sampling draws from LibTorch's default
// generator (the caller seeds it; one draw from it seeds the fused sampler).
// Stops early, with `cancelled`, once `cancel` (optional) is set. Throws the
// env's Error.
Evaluation evaluate_policy(PolicyNet& model, const EnvConfig& env_config, int64_t episodes,
                           bool greedy, uint64_t seed, const std::atomic<bool>* cancel = nullptr,
                           ModelConfig::FastPath fast_path = ModelConfig::FastPath::kAuto);

}  // namespace pronghorn::actor

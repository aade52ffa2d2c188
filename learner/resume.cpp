#include "learner/resume.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "learner/checkpoint.h"
#include "learner/checkpoint_model.h"
#include "learner/error_line.h"
#include "learner/optimizer_archive.h"
#include "learner/trainer.h"
#include "model/optimizer_state.h"

namespace pronghorn::learner {
namespace {

// A candidate that does not fit the run; its message is the reason.
struct Unfit : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string shape_of(const at::Tensor& t) {
  return fmt::format("{} [{}] on {}", c10::toString(t.scalar_type()), fmt::join(t.sizes(), ", "),
                     t.device().str());
}

// Fails unless `t` is shaped, typed and placed as the parameter it belongs
// to, and finite. An optional tensor may be missing (LibTorch loads a
// missing tensor as an undefined one, which the optimizer's step would use).
enum class Need { kRequired, kOptional };
void check_state_tensor(const at::Tensor& t, const at::Tensor& parameter, const char* name,
                        size_t index, Need need = Need::kRequired) {
  if (!t.defined() && need == Need::kRequired) {
    throw Unfit(fmt::format(
        "optimizer state of parameter tensor {} has no {} (another optimizer's?)", index, name));
  }
  if (!t.defined()) return;
  if (t.sizes() != parameter.sizes() || t.scalar_type() != parameter.scalar_type() ||
      t.device() != parameter.device()) {
    throw Unfit(fmt::format("optimizer state {} of parameter tensor {} is {}, the parameter {}",
                            name, index, shape_of(t), shape_of(parameter)));
  }
  if (!torch::isfinite(t).all().item<bool>()) {
    throw Unfit(
        fmt::format("optimizer state {} of parameter tensor {} is not finite", name, index));
  }
}

void check_step(int64_t step, size_t index, uint64_t learner_steps) {
  // One optimizer step per learner step: a parameter with state has had at
  // least one and at most that many.
  if (step < 1 || static_cast<uint64_t>(step) > learner_steps) {
    throw Unfit(fmt::format("optimizer step count {} of parameter tensor {} with {} learner steps",
                            step, index, learner_steps));
  }
}

void check_optimizer(torch::optim::Optimizer& optimizer, LearnerConfig::Optimizer kind,
                     uint64_t learner_steps) {
  const std::vector<at::Tensor>& params = optimizer.param_groups().at(0).params();
  for (size_t i = 0; i < params.size(); ++i) {
    auto found = optimizer.state().find(optimizer_state_key(params[i]));
    if (found == optimizer.state().end()) continue;
    if (kind == LearnerConfig::Optimizer::kRmsprop) {
      const auto& s = static_cast<const torch::optim::RMSpropParamState&>(*found->second);
      check_step(s.step(), i, learner_steps);
      check_state_tensor(s.square_avg(), params[i], "square_avg", i);
      check_state_tensor(s.momentum_buffer(), params[i], "momentum_buffer", i, Need::kOptional);
      check_state_tensor(s.grad_avg(), params[i], "grad_avg", i, Need::kOptional);
    } else {
      const auto& s = static_cast<const torch::optim::AdamParamState&>(*found->second);
      check_step(s.step(), i, learner_steps);
      check_state_tensor(s.exp_avg(), params[i], "exp_avg", i);
      check_state_tensor(s.exp_avg_sq(), params[i], "exp_avg_sq", i);
      check_state_tensor(s.max_exp_avg_sq(), params[i], "max_exp_avg_sq", i, Need::kOptional);
    }
  }
}

// The checkpoint's optimizer state loaded into a scratch optimizer of the
// run's kind over copies of the model's parameters, checked, and written out
// again: the bytes the Trainer then loads, with every tensor on its device.
// The policy face's TrainingPolicy makes the real one (model/policy_face.h);
// the kinds here must follow it.
std::string checked_optimizer_state(const std::string& state, Trainer& trainer,
                                    const Config& config, uint64_t learner_steps) {
  std::vector<at::Tensor> copies;
  for (const at::Tensor& p : trainer.model()->parameters()) copies.push_back(p.detach().clone());
  std::unique_ptr<torch::optim::Optimizer> scratch;
  if (config.learner.optimizer == LearnerConfig::Optimizer::kRmsprop) {
    scratch = std::make_unique<torch::optim::RMSprop>(copies, torch::optim::RMSpropOptions());
  } else {
    scratch = std::make_unique<torch::optim::Adam>(copies, torch::optim::AdamOptions());
  }
  const auto unfit = [&](const std::string& why) {
    return Unfit(fmt::format("optimizer state does not load into this run's {} optimizer: {}",
                             to_string(config.learner.optimizer), why));
  };
  try {
    load_optimizer(state, *scratch, trainer.device());
  } catch (const c10::Error& e) {
    throw unfit(first_line(e.what_without_backtrace()));
  } catch (const Error& e) {
    throw unfit(e.what());
  }
  check_optimizer(*scratch, config.learner.optimizer, learner_steps);
  return save_optimizer(*scratch);
}

// The RNG state as the tensor set_state() takes, once a scratch generator
// has accepted it (LibTorch checks the Mersenne Twister's fields).
at::Tensor checked_rng_state(const std::string& rng) {
  const int64_t expected = at::detail::getDefaultCPUGenerator().get_state().numel();
  if (static_cast<int64_t>(rng.size()) != expected) {
    throw Unfit(fmt::format("RNG state of {} bytes, this LibTorch's CPU generator has {}",
                            rng.size(), expected));
  }
  at::Tensor state = at::empty({expected}, at::kByte);
  std::memcpy(state.data_ptr<uint8_t>(), rng.data(), rng.size());
  at::Generator scratch = at::make_generator<at::CPUGeneratorImpl>();
  try {
    scratch.set_state(state);
  } catch (const c10::Error& e) {
    throw Unfit("RNG state refused by the CPU generator: " +
                first_line(e.what_without_backtrace()));
  }
  return state;
}

// Bytes a checkpoint of this model can take: the parameters, at most three
// optimizer tensors per parameter, and room for archive headers and the RNG.
uint64_t max_checkpoint_bytes(Trainer& trainer) {
  const auto parameter_bytes = static_cast<uint64_t>(trainer.model()->parameter_count()) * 4;
  return 5 * parameter_bytes + (uint64_t{64} << 20);
}

// Validates `c` against the run and applies it to `trainer`; throws when it
// does not fit (before anything is applied) or when applying fails.
void apply(const Checkpoint& c, Trainer& trainer, const Config& config) {
  const std::string unfit = parameters_unfit(c, parameter_layout(*trainer.model()));
  if (!unfit.empty()) throw Unfit(unfit);
  const bool normalizes = trainer.observation_stats() != nullptr;
  if (normalizes && !c.observation_stats) {
    throw Unfit(
        "holds no observation statistics: the run that wrote it did not set "
        "model.normalize_observations, which this run sets");
  }
  if (!normalizes && c.observation_stats) {
    throw Unfit(
        "holds observation statistics: the run that wrote it set "
        "model.normalize_observations = true, which this run does not");
  }
  if (normalizes && c.observation_stats->size() != trainer.model()->observation_size()) {
    throw Unfit(
        fmt::format("holds observation statistics of {} values, the env's observations "
                    "have {}",
                    c.observation_stats->size(), trainer.model()->observation_size()));
  }
  const at::Tensor rng = checked_rng_state(c.rng);
  const std::string optimizer =
      checked_optimizer_state(c.optimizer, trainer, config, c.counters.learner_steps);
  trainer.load_optimizer_state(optimizer);
  trainer.model()->read_flat(c.parameters.data());
  if (c.observation_stats) trainer.restore_observation_stats(*c.observation_stats);
  if (ReturnScaler* scaler = trainer.return_scaler()) {
    if (c.return_stats) {
      scaler->restore(*c.return_stats);
    } else {
      spdlog::warn(
          "checkpoint holds no return-scaling statistics: loss.return_scaling starts them "
          "afresh");
    }
  }
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  generator.set_state(rng);
}

}  // namespace

ResumePoint resume_from_checkpoints(const std::string& folder, Trainer& trainer,
                                    const Config& config) {
  const std::vector<std::string> candidates = checkpoint_candidates(folder);
  PRONGHORN_CHECK(!candidates.empty(), "resume: no checkpoint in ", folder, " (files named ",
                  checkpoint_file_name(0), " and so on)");
  const uint64_t max_bytes = max_checkpoint_bytes(trainer);
  std::vector<std::string> reasons;
  for (const std::string& path : candidates) {
    std::string why;
    try {
      if (std::optional<Checkpoint> c = read_checkpoint(path, &why, max_bytes)) {
        apply(*c, trainer, config);
        return {path, c->counters};
      }
    } catch (const std::exception& e) {  // any failure: the next older one is tried
      why = reason_of(e);
    }
    spdlog::warn("checkpoint {} skipped: {}", path, why);
    reasons.push_back(std::filesystem::path(path).filename().string() + ": " + why);
  }
  throw Error(
      fmt::format("resume: no valid checkpoint in {}: {}", folder, fmt::join(reasons, "; ")));
}

}  // namespace pronghorn::learner

// Resuming from checkpoints a run did not write whole or right: each crafted
// file passes its checksum (save_checkpoint writes it) and is wrong in one
// field; the resume skips it for the newest that fits, or fails naming them all.
#include "learner/resume.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "core/testing/error_of.h"
#include "envs/env.h"
#include "learner/checkpoint.h"
#include "learner/checkpoint_model.h"
#include "learner/testing/resume_run.h"
#include "learner/trainer.h"

namespace pronghorn::learner {
namespace {

namespace fs = std::filesystem;

using testing::fresh_folder;
using testing::Learner;
using testing::random_batch;
using testing::snapshot;

// `c` written as the checkpoint at `env_steps` (counters moved to fit).
std::string write_at(const std::string& dir, Checkpoint c, uint64_t env_steps) {
  c.counters.env_steps = env_steps;
  return save_checkpoint(dir, c, 1000);
}

// The serialised state of an optimizer of type Opt over copies of `run`'s
// parameters, each reshaped by `reshape`, after `steps` steps with every
// gradient `grad`: optimizer state a checkpoint could carry that is not the run's.
template <typename Opt, typename Options>
std::string optimizer_state(Learner& run, int steps, float grad,
                            at::Tensor (*reshape)(const at::Tensor&) = nullptr,
                            void (*edit)(torch::optim::Optimizer&) = nullptr) {
  std::vector<at::Tensor> params;
  for (const at::Tensor& p : run.trainer.model()->parameters()) {
    at::Tensor copy = p.detach().clone();
    if (reshape != nullptr) copy = reshape(copy).contiguous();
    params.push_back(copy.requires_grad_(true));
  }
  Opt optimizer(params, Options());
  for (int i = 0; i < steps; ++i) {
    for (at::Tensor& p : params) p.mutable_grad() = torch::full_like(p, grad);
    optimizer.step();
  }
  if (edit != nullptr) edit(optimizer);
  torch::serialize::OutputArchive archive;
  optimizer.save(archive);
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

at::Tensor flattened(const at::Tensor& t) { return t.flatten(); }

// Adam state without its first moments (LibTorch writes no undefined tensor).
void drop_exp_avg(torch::optim::Optimizer& optimizer) {
  for (auto& entry : optimizer.state()) {
    static_cast<torch::optim::AdamParamState&>(*entry.second).exp_avg(at::Tensor());
  }
}

TEST(ResumeTest, RestoresWeightsOptimizerRngAndCountersFromTheNewest) {
  const std::string dir = fresh_folder("restore");
  Learner original;
  for (uint64_t step = 1; step <= 3; ++step) {
    original.trainer.learn(random_batch(step), 0.0);
    save_checkpoint(dir, snapshot(original, step), 3);
  }
  const Checkpoint newest = snapshot(original, 3);

  torch::manual_seed(12345);  // another start: other weights, another generator state
  Learner resumed;
  ASSERT_NE(resumed.weights(), newest.parameters);
  const ResumePoint r = resume_from_checkpoints(dir, resumed.trainer, resumed.config);
  EXPECT_EQ(r.path, dir + "/" + checkpoint_file_name(300));
  EXPECT_EQ(r.counters.env_steps, 300u);
  EXPECT_EQ(r.counters.learner_steps, 3u);
  EXPECT_EQ(r.counters.episodes, 3u);
  EXPECT_EQ(r.counters.policy_version, 4u);
  EXPECT_EQ(resumed.weights(), newest.parameters);
  at::Tensor rng = at::detail::getDefaultCPUGenerator().get_state();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(rng.data_ptr<uint8_t>()), rng.numel()),
            newest.rng);
  // The same next step on both: the optimizer state (Adam's moments and step
  // counts) came back whole.
  original.trainer.learn(random_batch(4), 0.0);
  resumed.trainer.learn(random_batch(4), 0.0);
  EXPECT_EQ(resumed.weights(), original.weights());
}

// ‖a − b‖ (L2) over the flat parameters.
double distance(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
  return std::sqrt(sum);
}

// A run trained on the fused MLP path (model.fast_path = auto,
// model/fast_mlp_train.h) resumes on LibTorch (off), and one trained on
// LibTorch resumes fused: the checkpoint carries the same parameters and
// optimizer state either way, and the next step on the other path lands
// where the original's does to float32 rounding (within 1% of the step).
TEST(ResumeTest, ARunTrainedOnTheFusedPathResumesOnLibTorchAndBack) {
  for (const std::string from : {"auto", "off"}) {
    const std::string to = from == "auto" ? "off" : "auto";
    const std::string dir = fresh_folder(("fast-path-" + from).c_str());
    torch::manual_seed(5);
    Learner original({"model.fast_path=" + from});
    for (uint64_t step = 1; step <= 2; ++step) original.trainer.learn(random_batch(step), 0.0);
    save_checkpoint(dir, snapshot(original, 2), 3);
    torch::manual_seed(999);
    Learner resumed({"model.fast_path=" + to});
    resume_from_checkpoints(dir, resumed.trainer, resumed.config);
    ASSERT_EQ(resumed.weights(), original.weights()) << from << " → " << to;
    const std::vector<float> before = original.weights();
    original.trainer.learn(random_batch(3), 0.0);
    resumed.trainer.learn(random_batch(3), 0.0);
    const double step = distance(original.weights(), before);
    EXPECT_GT(step, 0.0);
    EXPECT_LT(distance(resumed.weights(), original.weights()), 0.01 * step)
        << from << " → " << to << ": step " << step;
  }
}

TEST(ResumeTest, CraftedCandidatesAreSkippedForTheNewestThatFitsOrAllNamedInOneError) {
  const std::string dir = fresh_folder("crafted");
  Learner source;
  source.trainer.learn(random_batch(1), 0.0);
  const Checkpoint good = snapshot(source, 1);
  std::vector<std::pair<uint64_t, std::string>> expected;  // env steps, reason
  auto craft = [&](uint64_t env_steps, Checkpoint c, const std::string& reason) {
    write_at(dir, std::move(c), env_steps);
    expected.emplace_back(env_steps, reason);
  };
  Checkpoint c = good;
  c.optimizer = "not an archive";
  craft(200, c, "optimizer state does not load into this run's adam optimizer: ");
  c = good;
  std::fill(c.rng.begin(), c.rng.end(), '\0');
  craft(300, c, "RNG state refused by the CPU generator: Invalid mt19937 state");
  c = good;
  c.rng = "rng";
  craft(400, c, "RNG state of 3 bytes, this LibTorch's CPU generator has");
  c = good;
  c.parameters.push_back(0.5f);
  c.parameter_layout.push_back({"extra", {1}});
  craft(500, c, "holds 4676 parameters, the model has 4675");
  c = good;
  c.optimizer =
      optimizer_state<torch::optim::Adam, torch::optim::AdamOptions>(source, 1, 0.1f, &flattened);
  craft(600, c, "optimizer state exp_avg of parameter tensor 0 is Float [");
  c = good;
  c.optimizer =
      optimizer_state<torch::optim::Adam, torch::optim::AdamOptions>(source, 1, std::nanf(""));
  craft(700, c, "optimizer state exp_avg of parameter tensor 0 is not finite");
  c = good;
  c.optimizer = optimizer_state<torch::optim::Adam, torch::optim::AdamOptions>(source, 3, 0.1f);
  craft(800, c, "optimizer step count 3 of parameter tensor 0 with 1 learner steps");
  c = good;
  c.optimizer =
      optimizer_state<torch::optim::RMSprop, torch::optim::RMSpropOptions>(source, 1, 0.1f);
  craft(900, c, "optimizer state does not load into this run's adam optimizer: ");
  c = good;
  c.optimizer = optimizer_state<torch::optim::Adam, torch::optim::AdamOptions>(
      source, 1, 0.1f, nullptr, &drop_exp_avg);
  craft(950, c, "optimizer state of parameter tensor 0 has no exp_avg");
  c = good;
  c.parameters[3] = std::nanf("");
  craft(1000, c, "parameter 3 of");
  c = good;
  c.counters.learner_steps = c.counters.episodes = c.counters.policy_version = UINT64_MAX;
  craft(UINT64_MAX, c, "env_steps = 18446744073709551615: more than any run takes");

  torch::manual_seed(777);
  Learner resumed;
  const std::vector<float> before = resumed.weights();
  const std::string message = pronghorn::testing::error_of(
      [&] { resume_from_checkpoints(dir, resumed.trainer, resumed.config); });
  EXPECT_NE(message.find("resume: no valid checkpoint in " + dir + ": "), std::string::npos)
      << message;
  for (const auto& [env_steps, reason] : expected) {
    EXPECT_NE(message.find(checkpoint_file_name(env_steps) + ": " + reason), std::string::npos)
        << reason << "\n"
        << message;
  }
  EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
  EXPECT_EQ(resumed.weights(), before) << "nothing applied from a candidate that did not fit";

  write_at(dir, good, 100);  // one good checkpoint, older than all of them
  const ResumePoint r = resume_from_checkpoints(dir, resumed.trainer, resumed.config);
  EXPECT_EQ(r.path, dir + "/" + checkpoint_file_name(100));
  EXPECT_EQ(resumed.weights(), good.parameters);
  source.trainer.learn(random_batch(2), 0.0);
  resumed.trainer.learn(random_batch(2), 0.0);
  EXPECT_EQ(resumed.weights(), source.weights()) << "the optimizer state is the good one's";
}

TEST(ResumeTest, ACheckpointOfAnotherOptimizerOrModelIsRefused) {
  const std::string dir = fresh_folder("other-run");
  Learner rmsprop({"learner.optimizer=rmsprop"});
  rmsprop.trainer.learn(random_batch(1), 0.0);
  write_at(dir, snapshot(rmsprop, 1), 100);
  Learner adam;
  EXPECT_NE(pronghorn::testing::error_of([&] {
              resume_from_checkpoints(dir, adam.trainer, adam.config);
            }).find(checkpoint_file_name(100) + ": "),
            std::string::npos);
  Learner same({"learner.optimizer=rmsprop"});
  EXPECT_EQ(resume_from_checkpoints(dir, same.trainer, same.config).counters.learner_steps, 1u);
  Learner wider({"model.hidden=[65, 64]"});
  EXPECT_NE(pronghorn::testing::error_of([&] {
              resume_from_checkpoints(dir, wider.trainer, wider.config);
            }).find("parameters, the model has"),
            std::string::npos);
}

// Format 2 names each parameter tensor: one the model does not have, or
// has in another shape, is refused naming it, even where the count agrees.
TEST(ResumeTest, AParameterWhoseNameOrShapeIsNotTheModelsIsRefusedNamingIt) {
  const std::string dir = fresh_folder("names");
  Learner source;
  source.trainer.learn(random_batch(1), 0.0);
  const Checkpoint good = snapshot(source, 1);
  const std::vector<NamedShape> model = parameter_layout(*source.trainer.model());
  ASSERT_GE(model.size(), 2u);
  ASSERT_EQ(model[0].shape.size(), 2u);
  Checkpoint renamed = good;
  renamed.parameter_layout[1].name = "torso.9.bias";
  write_at(dir, renamed, 200);
  Checkpoint transposed = good;  // the same count of floats
  std::swap(transposed.parameter_layout[0].shape[0], transposed.parameter_layout[0].shape[1]);
  write_at(dir, transposed, 100);
  Learner resumed;
  const std::string message = pronghorn::testing::error_of(
      [&] { resume_from_checkpoints(dir, resumed.trainer, resumed.config); });
  EXPECT_NE(message.find(fmt::format("{}: parameter tensor 1 is \"torso.9.bias\", the model's is "
                                     "\"{}\"",
                                     checkpoint_file_name(200), model[1].name)),
            std::string::npos)
      << message;
  EXPECT_NE(message.find(fmt::format("{}: parameter \"{}\" is [{}, {}], the model's is [{}, {}]",
                                     checkpoint_file_name(100), model[0].name, model[0].shape[1],
                                     model[0].shape[0], model[0].shape[0], model[0].shape[1])),
            std::string::npos)
      << message;
  Checkpoint fewer = good;  // the last tensor gone with its floats
  int64_t last = 1;
  for (int64_t dim : model.back().shape) last *= dim;
  fewer.parameter_layout.pop_back();
  fewer.parameters.resize(good.parameters.size() - static_cast<size_t>(last));
  EXPECT_EQ(parameters_unfit(fewer, model),
            fmt::format("holds {} parameters, the model has {} (another model or env?): the "
                        "model's parameter \"{}\" [{}] is not in it",
                        fewer.parameters.size(), good.parameters.size(), model.back().name,
                        fmt::join(model.back().shape, ", ")));
  EXPECT_EQ(parameters_unfit(good, model), "");
}

// learner/testing/cartpole_format1.ckpt (checkpoint_format_test.cpp says
// where it came from): a checkpoint of the format before named sections
// still resumes a CartPole run, optimizer and RNG state included.
TEST(ResumeTest, ACheckpointOfFormat1Resumes) {
  const std::string dir = fresh_folder("format1");
  const Checkpoint held = load_checkpoint(PRONGHORN_CHECKPOINT_V1);
  fs::create_directories(dir);
  fs::copy_file(PRONGHORN_CHECKPOINT_V1, dir + "/" + checkpoint_file_name(held.counters.env_steps));
  Learner resumed;
  const ResumePoint r = resume_from_checkpoints(dir, resumed.trainer, resumed.config);
  EXPECT_EQ(r.counters, held.counters);
  EXPECT_EQ(resumed.weights(), held.parameters);
  resumed.trainer.learn(random_batch(1), 0.0);  // its Adam state steps on
  EXPECT_NE(resumed.weights(), held.parameters);
}

TEST(ResumeTest, AFifoALinkToDevZeroAndADirectoryNamedNewerAreSkippedWithoutBlocking) {
  const std::string dir = fresh_folder("not-files");
  Learner source;
  write_at(dir, snapshot(source, 0), 0);  // a run stopped before its first step
  ASSERT_EQ(mkfifo((dir + "/" + checkpoint_file_name(300)).c_str(), 0600), 0);
  fs::create_symlink("/dev/zero", dir + "/" + checkpoint_file_name(200));
  fs::create_directory(dir + "/" + checkpoint_file_name(100));
  alarm(20);  // a read that blocks ends the test instead of hanging it
  Learner resumed;
  const ResumePoint r = resume_from_checkpoints(dir, resumed.trainer, resumed.config);
  alarm(0);
  EXPECT_EQ(r.path, dir + "/" + checkpoint_file_name(0));
  EXPECT_EQ(resumed.weights(), source.weights());
}

TEST(ResumeTest, NoCheckpointAtAllIsAnErrorNamingTheFolder) {
  const std::string dir = fresh_folder("none");
  Learner run;
  const std::string message =
      pronghorn::testing::error_of([&] { resume_from_checkpoints(dir, run.trainer, run.config); });
  EXPECT_NE(message.find("resume: no checkpoint in " + dir), std::string::npos) << message;
}

}  // namespace
}  // namespace pronghorn::learner

// The actor and the learner agree on a recurrent core's state: a real actor
// (actor/actor.h, on a thread) writes unrolls of the memory env into a ring;
// the learner's side (make_batch, PolicyNet::forward_sequence, the same
// weights) replays each one from the state stored in its slot and must get
// the actor's behaviour log-probs back, end where the next unroll's stored
// state begins, and find each truncated step's final value computed from the
// state before its reset.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "actor/actor.h"
#include "buffer/ring.h"
#include "buffer/testing/names.h"
#include "buffer/weight_slab.h"
#include "envs/env.h"
#include "learner/batch.h"
#include "model/policy.h"

namespace pronghorn {
namespace {

using namespace std::chrono_literals;

void expect_close(const at::Tensor& actual, const at::Tensor& expected, const char* what,
                  int unroll) {
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  const double error = (actual - expected).abs().max().item<double>();
  EXPECT_LT(error, 2e-5) << what << ", unroll " << unroll;
}

TEST(RecurrentStateTest, TheLearnerReplaysTheActorsStepsFromTheStoredState) {
  Config c;
  c.env.name = "memory";
  c.env.num_envs = 5;
  c.env.max_episode_steps = 9;  // episodes of 7–9 steps terminate, longer ones are cut
  c.actor.unroll_length = 7;    // so episodes straddle unrolls
  c.model.hidden = {8};
  c.model.core = ModelConfig::Core::kLstm;
  c.model.core_hidden = 6;
  const int64_t T = c.actor.unroll_length, K = c.env.num_envs;
  EnvConfig one = c.env;
  one.num_envs = 1;
  const EnvSpec spec = envs::make_env(one, 0)->spec();

  const std::string ring_name = buffer::testing::unique_name("recurrent-ring");
  const std::string slab_name = buffer::testing::unique_name("recurrent-slab");
  auto ring = buffer::Ring::create(ring_name, buffer::unroll_spec_for(spec, c), 4);
  torch::manual_seed(11);
  PolicyNet model(model_spec_for(spec, c.model));
  auto slab = buffer::WeightSlab::create(slab_name, model->parameter_count());
  std::vector<float> flat(model->parameter_count());
  model->write_flat(flat.data());
  const uint64_t version = slab->publish(flat.data());

  std::atomic<bool> stop{false};
  std::thread actor(
      [&] { actor::run_actor({.config = c, .ring = ring_name, .slab = slab_name}, stop); });
  // Consecutive unrolls of the one actor, copied out of their slots.
  constexpr int kUnrolls = 6;
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<buffer::SlotStamp> stamps;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (static_cast<int>(bytes.size()) < kUnrolls && std::chrono::steady_clock::now() < deadline) {
    auto taken = ring->take(1, version, UINT64_MAX / 2, 500ms);
    if (!taken) continue;
    const uint8_t* data = (*taken)[0].data;
    bytes.emplace_back(data, data + ring->layout().bytes);
    stamps.push_back((*taken)[0].stamp);
    ring->release(*taken);
  }
  stop = true;
  actor.join();
  ASSERT_EQ(static_cast<int>(bytes.size()), kUnrolls) << "the actor made too few unrolls in 60 s";

  torch::NoGradGuard no_grad;
  const at::Tensor blank = at::zeros({K, 3});
  at::Tensor query = at::zeros({K, 3});
  query.select(1, 2).fill_(1.0);
  int truncations = 0, terminations = 0;
  at::Tensor expected_start = at::zeros({2, K, 6});  // the first unroll starts from zeros
  for (int u = 0; u < kUnrolls; ++u) {
    ASSERT_EQ(stamps[u].policy_version, version);
    buffer::TakenSlot slot;
    slot.data = bytes[u].data();
    slot.stamp = stamps[u];
    const learner::Batch b = learner::make_batch({slot}, ring->layout(), spec, c, version);
    ASSERT_TRUE(b.core_state.defined());
    expect_close(b.core_state, expected_start, "stored state", u);

    // The learner's pass over the T steps, the state zeroed after each ended step.
    CoreState state{b.core_state[0], b.core_state[1]};
    const PolicyOutput out = model->forward_sequence(b.obs.slice(0, 0, T), state, b.ended);
    const at::Tensor log_probs =
        at::log_softmax(out.logits, -1).gather(1, b.actions.flatten().unsqueeze(1)).view({T, K});
    expect_close(log_probs, b.behaviour_log_probs, "behaviour log-probs", u);
    expected_start = at::stack({state.h, state.c});
    terminations += b.ended.sum().item<int>() - b.truncated.sum().item<int>();

    // Step by step for the final values: from the state after step t, before its reset.
    CoreState step{b.core_state[0], b.core_state[1]};
    for (int64_t t = 0; t < T; ++t) {
      model->forward(b.obs[t], step);
      CoreState from_blank = step, from_query = step;
      const at::Tensor v_blank = model->forward(blank, from_blank).value;
      const at::Tensor v_query = model->forward(query, from_query).value;
      for (int64_t k = 0; k < K; ++k) {
        if (!b.truncated[t][k].item<bool>()) continue;
        ++truncations;
        // The cut episode's last observation is a blank or its query.
        const float v = b.final_values[t][k].item<float>();
        EXPECT_LT(std::min(std::abs(v - v_blank[k].item<float>()),
                           std::abs(v - v_query[k].item<float>())),
                  2e-5)
            << "unroll " << u << " step " << t << " env " << k;
      }
      const at::Tensor keep = b.ended[t].eq(0).to(at::kFloat).unsqueeze(1);
      step = {step.h * keep, step.c * keep};
    }
  }
  EXPECT_GT(truncations, 0) << "the time limit never cut an episode";
  EXPECT_GT(terminations, 0) << "no episode ended by its answer";
}

}  // namespace
}  // namespace pronghorn

// The recurrent core (model.core = "lstm"): one LSTM layer between the torso
// and the heads, with the gate math and parameters of torch::nn::LSTM (gates
// i, f, g, o; weight_ih [4H, in], weight_hh [4H, H], bias_ih and bias_hh
// [4H]), run over a sequence of steps whose state is zeroed where an episode
// ended. model/lstm_core_test.cpp checks it, gradients included, against the
// stock torch::nn::LSTM stepped over the same sequence.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <cstdint>

namespace pronghorn {

// The core's state for N envs: h and c, [N, H] each, of the model's dtype and
// device. Undefined tensors for a feed-forward model.
struct CoreState {
  at::Tensor h, c;
};

class LstmCoreImpl : public torch::nn::Module {
 public:
  LstmCoreImpl(int64_t input, int64_t hidden);

  int64_t hidden() const { return hidden_; }

  // x: [S, N, input]; state: at step 0, replaced by the state after step S−1.
  // ended: [S−1, N] or [S, N] (any dtype, nonzero = ended) or undefined:
  // where ended[s, n] is set, row n of the state after step s is zeroed
  // (the next step starts a new episode). Returns the outputs h_s, [S, N, H].
  at::Tensor forward(const at::Tensor& x, CoreState& state, const at::Tensor& ended);

 private:
  int64_t hidden_;
  at::Tensor weight_ih_, weight_hh_, bias_ih_, bias_hh_;
};
TORCH_MODULE(LstmCore);

}  // namespace pronghorn

#include "model/lstm_core.h"

#include <cmath>
#include <vector>

namespace pronghorn {

LstmCoreImpl::LstmCoreImpl(int64_t input, int64_t hidden) : hidden_(hidden) {
  // torch::nn::LSTM's initialisation: every parameter uniform in ±1/√H.
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden));
  weight_ih_ =
      register_parameter("weight_ih", at::empty({4 * hidden, input}).uniform_(-bound, bound));
  weight_hh_ =
      register_parameter("weight_hh", at::empty({4 * hidden, hidden}).uniform_(-bound, bound));
  bias_ih_ = register_parameter("bias_ih", at::empty({4 * hidden}).uniform_(-bound, bound));
  bias_hh_ = register_parameter("bias_hh", at::empty({4 * hidden}).uniform_(-bound, bound));
}

at::Tensor LstmCoreImpl::forward(const at::Tensor& x, CoreState& state, const at::Tensor& ended) {
  const int64_t S = x.size(0);
  // The input's share of the gates for every step in one matrix product.
  // Unbound, not indexed: the backward of x[s] would fill a zero tensor of
  // all S steps for each step (S² work); unbind's stacks the S gradients once.
  const std::vector<at::Tensor> input_gates =
      at::linear(x, weight_ih_, bias_ih_ + bias_hh_).unbind(0);  // S × [N, 4H]
  const at::Tensor keep = ended.defined() ? ended.eq(0).to(x.scalar_type()).unsqueeze(-1)
                                          : at::Tensor();  // [S−1 or S, N, 1]: 0 where ended
  at::Tensor h = state.h, c = state.c;
  std::vector<at::Tensor> outputs;
  outputs.reserve(S);
  for (int64_t s = 0; s < S; ++s) {
    const std::vector<at::Tensor> gates =
        (input_gates[s] + at::matmul(h, weight_hh_.t())).chunk(4, 1);
    c = at::sigmoid(gates[1]) * c + at::sigmoid(gates[0]) * at::tanh(gates[2]);
    h = at::sigmoid(gates[3]) * at::tanh(c);
    outputs.push_back(h);
    if (keep.defined() && s < keep.size(0)) {
      h = h * keep[s];
      c = c * keep[s];
    }
  }
  state.h = h;
  state.c = c;
  return at::stack(outputs);
}

}  // namespace pronghorn

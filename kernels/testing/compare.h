// For kernel tests: compare a float32 result with a float64 reference and,
// on failure, print the first mismatches with their indices.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>

namespace pronghorn::kernels::testing {

// Passes when |actual − expected| ≤ atol + rtol·|expected| everywhere.
inline ::testing::AssertionResult all_close(const at::Tensor& actual, const at::Tensor& expected,
                                            double rtol, double atol) {
  if (actual.sizes() != expected.sizes()) {
    return ::testing::AssertionFailure()
           << "shape " << actual.sizes() << " vs expected " << expected.sizes();
  }
  at::Tensor a = actual.to(at::kDouble).contiguous().cpu();
  at::Tensor e = expected.to(at::kDouble).contiguous().cpu();
  at::Tensor bad = ((a - e).abs() > atol + rtol * e.abs()) | (a.isnan() != e.isnan());
  int64_t count = bad.sum().item<int64_t>();
  if (count == 0) return ::testing::AssertionSuccess();
  std::ostringstream out;
  if (a.dim() == 0) {  // a scalar has no index to print
    return ::testing::AssertionFailure()
           << "got " << a.item<double>() << ", expected " << e.item<double>();
  }
  out << count << " of " << a.numel() << " elements differ; first:";
  at::Tensor where = bad.nonzero();
  for (int64_t m = 0; m < std::min<int64_t>(5, where.size(0)); ++m) {
    at::Tensor index = where[m];
    out << "\n  [";
    for (int64_t d = 0; d < index.size(0); ++d) out << (d ? ", " : "") << index[d].item<int64_t>();
    std::vector<at::indexing::TensorIndex> at_index;
    for (int64_t d = 0; d < index.size(0); ++d) at_index.emplace_back(index[d].item<int64_t>());
    out << "] got " << a.index(at_index).item<double>() << ", expected "
        << e.index(at_index).item<double>();
  }
  return ::testing::AssertionFailure() << out.str();
}

}  // namespace pronghorn::kernels::testing

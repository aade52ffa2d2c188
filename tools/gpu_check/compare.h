// One case of gpu_check's correctness part: the device's results against the
// host's for many outputs (every shape of the grid), keeping the largest
// errors and the first mismatches with where they are.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace pronghorn::gpu_check {

// An element passes when |got − want| ≤ rtol·|want| + atol·max|want| (the
// largest magnitude of that output over the shape: gradients scaled by 1/N
// and ratios of e^20 need a tolerance of their own size), and NaN only
// where the host has NaN.
struct Tolerance {
  double rtol;
  double atol;
};

class Comparison {
 public:
  void add(const std::string& where, const std::vector<float>& got, const std::vector<float>& want,
           Tolerance tol) {
    double largest = 0;
    for (float w : want)
      largest = std::isfinite(w) ? std::max(largest, std::fabs(double{w})) : largest;
    const double floor = tol.atol * std::max(largest, 1e-30);
    for (std::size_t i = 0; i < want.size(); ++i) {
      ++count_;
      const double g = got[i], w = want[i];
      if (std::isnan(g) || std::isnan(w) || std::isinf(g) || std::isinf(w)) {
        if (g == w || (std::isnan(g) && std::isnan(w))) continue;
        note(where, i, g, w);
        continue;
      }
      const double abs = std::fabs(g - w);
      max_abs_ = std::max(max_abs_, abs);
      if (std::fabs(w) > floor) max_rel_ = std::max(max_rel_, abs / std::fabs(w));
      if (abs > tol.rtol * std::fabs(w) + floor) note(where, i, g, w);
    }
  }

  bool passed() const { return bad_ == 0; }

  // "<label>  <count> values  max abs …  max rel …  PASS", then the first
  // mismatches when it failed.
  void print(const std::string& label) const {
    std::printf("  %-46s %9lld values  max abs %8.2e  max rel %8.2e  %s\n", label.c_str(),
                static_cast<long long>(count_), max_abs_, max_rel_, passed() ? "PASS" : "FAIL");
    for (const std::string& line : first_bad_) std::printf("      %s\n", line.c_str());
    if (bad_ > static_cast<int64_t>(first_bad_.size())) {
      std::printf("      ... %lld mismatches in all\n", static_cast<long long>(bad_));
    }
  }

 private:
  void note(const std::string& where, std::size_t i, double got, double want) {
    if (++bad_ > 5) return;
    first_bad_.push_back(where + "[" + std::to_string(i) + "]: device " + std::to_string(got) +
                         ", host " + std::to_string(want));
  }

  int64_t count_ = 0, bad_ = 0;
  double max_abs_ = 0, max_rel_ = 0;  // max rel over elements above the absolute floor
  std::vector<std::string> first_bad_;
};

}  // namespace pronghorn::gpu_check

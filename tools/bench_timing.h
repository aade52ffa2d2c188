// Timing for the `pronghorn bench` subcommands.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace pronghorn::cli {

// Median wall time of `f` in microseconds over `repeats` calls after
// `warmups` untimed ones.
inline double median_us(const std::function<void()>& f, int repeats, int warmups) {
  for (int i = 0; i < warmups; ++i) f();
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    auto start = std::chrono::steady_clock::now();
    f();
    times.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count());
  }
  std::nth_element(times.begin(), times.begin() + repeats / 2, times.end());
  return times[repeats / 2];
}

}  // namespace pronghorn::cli

// The clocks the code measures with, and their figures in seconds (what
// metrics, logs and configs speak): steady time for durations, deadlines and
// rates; wall time only for timestamps a reader compares with a calendar.
#pragma once

#include <chrono>

namespace pronghorn {

using SteadyClock = std::chrono::steady_clock;

template <class Rep, class Period>
double seconds(std::chrono::duration<Rep, Period> d) {
  return std::chrono::duration<double>(d).count();
}
inline double seconds_since(SteadyClock::time_point t) { return seconds(SteadyClock::now() - t); }

// A config's seconds as a steady-clock duration.
inline SteadyClock::duration as_duration(double seconds) {
  return std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(seconds));
}

// Seconds since the Unix epoch, now.
inline double unix_seconds() {
  return seconds(std::chrono::system_clock::now().time_since_epoch());
}

}  // namespace pronghorn

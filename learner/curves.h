// Learning curves a person can open: an SVG with the mean episode return
// against env steps and against wall time, rewritten (atomically) at every
// report into the run directory as curves.svg.
#pragma once

#include <string>
#include <vector>

namespace pronghorn::learner {

struct CurvePoint {
  double env_steps = 0;
  double seconds = 0;
  double return_mean = 0;
};

void write_curves_svg(const std::string& path, const std::string& title,
                      const std::vector<CurvePoint>& points);

}  // namespace pronghorn::learner

#include "learner/curves.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

namespace pronghorn::learner {
namespace {

constexpr double kPanelWidth = 420, kPanelHeight = 280, kMargin = 50, kTop = 34;

// One panel: return (y) against `x_of` (x), at horizontal offset `left`.
std::string panel(const std::vector<CurvePoint>& points, double (*x_of)(const CurvePoint&),
                  const std::string& x_label, double left) {
  double x_max = 1e-9, y_min = 0, y_max = 1e-9;
  for (const CurvePoint& p : points) {
    x_max = std::max(x_max, x_of(p));
    y_min = std::min(y_min, p.return_mean);
    y_max = std::max(y_max, p.return_mean);
  }
  auto sx = [&](double x) { return left + kMargin + x / x_max * (kPanelWidth - kMargin - 10); };
  auto sy = [&](double y) {
    return kTop + (1 - (y - y_min) / (y_max - y_min)) * (kPanelHeight - kMargin - kTop);
  };
  std::string out;
  const double x0 = left + kMargin, y0 = kPanelHeight - kMargin;
  out += fmt::format(R"(<line x1="{0}" y1="{2}" x2="{0}" y2="{1}" stroke="black"/>)", x0, y0, kTop);
  out += fmt::format(R"(<line x1="{0}" y1="{2}" x2="{1}" y2="{2}" stroke="black"/>)", x0,
                     left + kPanelWidth - 10, y0);
  for (int i = 0; i <= 4; ++i) {
    const double y = y_min + (y_max - y_min) * i / 4, x = x_max * i / 4;
    out += fmt::format(R"(<text x="{}" y="{}" font-size="10" text-anchor="end">{:.4g}</text>)",
                       x0 - 4, sy(y) + 3, y);
    out += fmt::format(R"(<text x="{}" y="{}" font-size="10" text-anchor="middle">{:.3g}</text>)",
                       sx(x), y0 + 14, x);
  }
  out += fmt::format(R"(<text x="{}" y="{}" font-size="12" text-anchor="middle">{}</text>)",
                     left + kMargin + (kPanelWidth - kMargin) / 2, y0 + 30, x_label);
  std::string line;
  for (const CurvePoint& p : points)
    line += fmt::format("{:.1f},{:.1f} ", sx(x_of(p)), sy(p.return_mean));
  out += fmt::format(R"(<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="{}"/>)",
                     line);
  return out;
}

}  // namespace

void write_curves_svg(const std::string& path, const std::string& title,
                      const std::vector<CurvePoint>& points) {
  const double width = 2 * kPanelWidth + 40, height = kPanelHeight;
  std::string svg = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif">)",
      width, height);
  svg += R"(<rect width="100%" height="100%" fill="white"/>)";
  svg += fmt::format(
      R"(<text x="{}" y="14" font-size="13" text-anchor="middle">{}: mean return of the last 100 episodes</text>)",
      width / 2, title);
  svg += panel(
      points, [](const CurvePoint& p) { return p.env_steps; }, "env steps", 0);
  svg += panel(
      points, [](const CurvePoint& p) { return p.seconds; }, "wall time (s)", kPanelWidth + 20);
  svg += "</svg>\n";
  // Not flushed to disk (it is redrawn every report); a failed write (a full
  // disk) leaves the old picture and no temporary file.
  const std::string tmp = path + ".tmp";
  if (std::ofstream(tmp) << svg << std::flush) {
    std::rename(tmp.c_str(), path.c_str());
  } else {
    std::remove(tmp.c_str());
  }
}

}  // namespace pronghorn::learner

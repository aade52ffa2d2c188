#include "learner/curves.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace pronghorn::learner {
namespace {

constexpr double kPanelWidth = 440, kPanelHeight = 300, kLeft = 62, kRight = 12, kTop = 44,
                 kBottom = 46;
// Redrawn every report: past this many points a curve keeps every other one.
constexpr size_t kMaxPoints = 2000;

const char* const kTrainColour = "#1f77b4";
const char* const kEvalColour = "#ff7f0e";
const char* const kTargetColour = "#d62728";

// The decimals a multiple of `step` needs (step 0.25 → 2, 500 → 0).
int decimals_of(double step) {
  for (int d = 0; d < 12; ++d) {
    const double scaled = step * std::pow(10.0, d);
    if (std::abs(scaled - std::round(scaled)) < 1e-6 * scaled) return d;
  }
  return 12;
}

struct Axis {
  std::vector<double> ticks;
  double lo = 0, hi = 1;
  double step() const { return ticks.size() > 1 ? ticks[1] - ticks[0] : 1; }
};

Axis axis_over(double lo, double hi) {
  Axis a;
  a.ticks = nice_ticks(lo, hi);
  a.lo = a.ticks.front();
  a.hi = a.ticks.back();
  return a;
}

void thin(std::vector<CurvePoint>& points) {
  if (points.size() <= kMaxPoints) return;
  std::vector<CurvePoint> kept;
  for (size_t i = 0; i < points.size(); i += 2) kept.push_back(points[i]);
  if (kept.back().env_steps != points.back().env_steps) kept.push_back(points.back());
  points = std::move(kept);
}

// One panel: return (y) against `x_of` (x), at horizontal offset `left`.
std::string panel(const Curves& c, double (*x_of)(const CurvePoint&), const std::string& x_label,
                  double left) {
  double x_hi = 0, y_lo = INFINITY, y_hi = -INFINITY;
  for (const auto* points : {&c.train, &c.eval}) {
    for (const CurvePoint& p : *points) {
      x_hi = std::max(x_hi, x_of(p));
      y_lo = std::min(y_lo, p.return_mean);
      y_hi = std::max(y_hi, p.return_mean);
    }
  }
  if (c.target != 0) {
    y_lo = std::min(y_lo, c.target);
    y_hi = std::max(y_hi, c.target);
  }
  if (!std::isfinite(y_lo)) {  // nothing to draw yet
    y_lo = 0;
    y_hi = 1;
  }
  const Axis x = axis_over(0, x_hi), y = axis_over(y_lo, y_hi);
  const double x0 = left + kLeft, x1 = left + kPanelWidth - kRight;
  const double y0 = kPanelHeight - kBottom, y1 = kTop;
  auto sx = [&](double v) { return x0 + (v - x.lo) / (x.hi - x.lo) * (x1 - x0); };
  auto sy = [&](double v) { return y0 - (v - y.lo) / (y.hi - y.lo) * (y0 - y1); };

  std::string out;
  for (double t : y.ticks) {
    out += fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="#ddd"/>)",
                       x0, sy(t), x1, sy(t));
    out += fmt::format(
        R"(<text class="tick y" x="{:.1f}" y="{:.1f}" font-size="10" text-anchor="end">{}</text>)",
        x0 - 4, sy(t) + 3, tick_label(t, y.step()));
  }
  for (double t : x.ticks) {
    out += fmt::format(
        R"(<text class="tick x" x="{:.1f}" y="{:.1f}" font-size="10" text-anchor="middle">{}</text>)",
        sx(t), y0 + 14, tick_label(t, x.step()));
  }
  out += fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" )"
                     R"(fill="none" stroke="black"/>)",
                     x0, y1, x1 - x0, y0 - y1);
  out += fmt::format(
      R"(<text class="label x" x="{:.1f}" y="{:.1f}" font-size="12" text-anchor="middle">{}</text>)",
      (x0 + x1) / 2, y0 + 32, x_label);
  const double label_y = (y0 + y1) / 2, label_x = left + 16;
  out += fmt::format(
      R"(<text class="label y" x="{0:.1f}" y="{1:.1f}" font-size="12" text-anchor="middle" )"
      R"svg(transform="rotate(-90 {0:.1f} {1:.1f})">mean episode return</text>)svg",
      label_x, label_y);
  if (c.target != 0) {
    out += fmt::format(
        R"(<line class="target" x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="{}" )"
        R"(stroke-dasharray="6 4"/>)",
        x0, sy(c.target), x1, sy(c.target), kTargetColour);
  }
  auto polyline = [&](const std::vector<CurvePoint>& points, const char* cls, const char* colour) {
    if (points.empty()) return;
    std::string line;
    for (const CurvePoint& p : points)
      line += fmt::format("{:.1f},{:.1f} ", sx(x_of(p)), sy(p.return_mean));
    out += fmt::format(
        R"(<polyline class="{}" fill="none" stroke="{}" stroke-width="1.5" points="{}"/>)", cls,
        colour, line);
  };
  polyline(c.train, "train", kTrainColour);
  polyline(c.eval, "eval", kEvalColour);
  // Each evaluation a marker of its own: a line needs two evaluations to
  // show, and a run that solves at once has one.
  for (const CurvePoint& p : c.eval) {
    out += fmt::format(R"(<circle class="eval-point" cx="{:.1f}" cy="{:.1f}" r="3.5" fill="{}"/>)",
                       sx(x_of(p)), sy(p.return_mean), kEvalColour);
  }
  return out;
}

std::string legend(const Curves& c, double width) {
  std::string out;
  double x = width / 2 - 230;
  auto item = [&](const char* colour, const char* dash, const std::string& text) {
    out += fmt::format(R"(<line x1="{0:.1f}" y1="30" x2="{1:.1f}" y2="30" stroke="{2}" )"
                       R"(stroke-width="2" stroke-dasharray="{3}"/>)",
                       x, x + 18, colour, dash);
    out += fmt::format(R"(<text x="{:.1f}" y="34" font-size="11">{}</text>)", x + 22, text);
    x += 30 + 6.2 * static_cast<double>(text.size());
  };
  item(kTrainColour, "none", "training (last 100 episodes)");
  if (!c.eval.empty()) {
    out += fmt::format(R"(<circle cx="{:.1f}" cy="30" r="3.5" fill="{}"/>)", x + 9, kEvalColour);
    item(kEvalColour, "none", "evaluation");
  }
  if (c.target != 0) item(kTargetColour, "6 4", fmt::format("target {:g}", c.target));
  return out;
}

// The number after "key": in a flat JSON line, if the key is there.
bool number_of(std::string_view line, std::string_view key, double& value) {
  const std::string quoted = fmt::format("\"{}\": ", key);
  const size_t at = line.find(quoted);
  if (at == std::string_view::npos) return false;
  const std::string rest(line.substr(at + quoted.size(), 32));
  char* end = nullptr;
  value = std::strtod(rest.c_str(), &end);
  return end != rest.c_str();
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int count) {
  if (!(hi > lo)) {  // one value (or none): a unit around it
    const double pad = lo == 0 ? 1 : std::abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / std::max(1, count);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / magnitude;
  const double step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * magnitude;
  const int decimals = decimals_of(step);
  const auto first = static_cast<int64_t>(std::floor(lo / step + 1e-9));
  const auto last = static_cast<int64_t>(std::ceil(hi / step - 1e-9));
  std::vector<double> ticks;
  for (int64_t k = first; k <= last; ++k) {
    // Through its decimal text: k × 0.1 is 0.30000000000000004 for k = 3.
    ticks.push_back(std::stod(fmt::format("{:.{}f}", static_cast<double>(k) * step, decimals)));
  }
  for (double& t : ticks) t = t == 0 ? 0 : t;  // no "-0"
  return ticks;
}

std::string tick_label(double value, double step) {
  // One unit for the whole axis, from its step: 0.5M 1.0M 1.5M, never 500k 1M.
  double unit = 1;
  const char* suffix = "";
  if (step >= 1e8) {
    unit = 1e9, suffix = "G";
  } else if (step >= 1e5) {
    unit = 1e6, suffix = "M";
  } else if (step >= 1e3) {
    unit = 1e3, suffix = "k";
  }
  if (value == 0) return "0";
  return fmt::format("{:.{}f}{}", value / unit, decimals_of(step / unit), suffix);
}

void write_curves_svg(const std::string& path, const std::string& title, const Curves& curves) {
  const double width = 2 * kPanelWidth + 20, height = kPanelHeight;
  std::string svg = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif">)",
      width, height);
  svg += R"(<rect width="100%" height="100%" fill="white"/>)";
  svg += fmt::format(R"(<text x="{}" y="14" font-size="13" text-anchor="middle">{}</text>)",
                     width / 2, title);
  svg += legend(curves, width);
  svg += panel(
      curves, [](const CurvePoint& p) { return p.env_steps; }, "env steps", 0);
  svg += panel(
      curves, [](const CurvePoint& p) { return p.seconds; }, "wall time (s)", kPanelWidth + 20);
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

void CurveHistory::add_file(const std::string& path) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) add_line(line);
}

void CurveHistory::add_line(std::string_view line) {
  double steps = 0, uptime = 0, count = 0, mean = 0;
  if (!number_of(line, "env_steps", steps) || !number_of(line, "uptime_s", uptime)) return;
  if (uptime < last_uptime_s_) offset_s_ += last_uptime_s_;  // a resumed run's new learner
  last_uptime_s_ = uptime;
  const double seconds = offset_s_ + uptime;
  // A run resumed from a checkpoint older than its last lines trains those
  // steps again: the picture keeps the steps it kept.
  // (An evaluation stays at the steps it was made at; a training point there is redrawn.)
  while (!curves_.train.empty() && curves_.train.back().env_steps >= steps)
    curves_.train.pop_back();
  while (!curves_.eval.empty() && curves_.eval.back().env_steps > steps) curves_.eval.pop_back();
  if (double target = 0; number_of(line, "target_return", target)) curves_.target = target;
  if (number_of(line, "episode_return_count", count) && count > 0 &&
      number_of(line, "episode_return_mean", mean)) {
    curves_.train.push_back({steps, seconds, mean});
    thin(curves_.train);
  }
  double eval[3] = {0, 0, 0};
  if (number_of(line, "eval_return_mean", eval[0])) {
    number_of(line, "eval_episodes", eval[1]);
    number_of(line, "eval_env_steps", eval[2]);
    const bool evaluated = eval[1] > 0 || eval[0] != 0;
    if (evaluated && !std::equal(eval, eval + 3, last_eval_)) {
      curves_.eval.push_back({steps, seconds, eval[0]});
      thin(curves_.eval);
      std::copy(eval, eval + 3, last_eval_);
    }
  }
}

}  // namespace pronghorn::learner

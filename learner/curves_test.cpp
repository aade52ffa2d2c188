// curves.svg as a reader finds it: rounded ticks (1, 2 or 5 × 10^k, printed
// without float noise), axis labels, the target line, the training and the
// evaluation curves, and the whole run across a resume (a learner's uptime
// starting again, a checkpoint older than the last lines).
#include "learner/curves.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>

namespace pronghorn::learner {
namespace {

// The step is 1, 2 or 5 × 10^k.
bool nice_step(double step) {
  const double magnitude = std::pow(10.0, std::floor(std::log10(step) + 1e-9));
  const double norm = step / magnitude;
  return std::abs(norm - 1) < 1e-9 || std::abs(norm - 2) < 1e-9 || std::abs(norm - 5) < 1e-9;
}

TEST(CurvesTest, TicksAreRoundAndCoverTheRange) {
  const std::pair<double, double> ranges[] = {
      {-1523.7, -143.2},   // Pendulum from random play to solved
      {-1600.2, -1580.9},  // Pendulum early, a narrow band
      {-1234.5, -1234.5},  // one point
      {0, 0},              // every return 0 so far
      {0, 0.3},            // 0.1 × 3 is not 0.3 in binary
      {0, 23'456'789},     // env steps
      {9.4, 500},          // CartPole
      {-21, 21},           // Pong
  };
  for (const auto& [lo, hi] : ranges) {
    const std::vector<double> t = nice_ticks(lo, hi);
    ASSERT_GE(t.size(), 3u) << lo << " " << hi;
    EXPECT_LE(t.size(), 12u) << lo << " " << hi;
    EXPECT_LE(t.front(), lo);
    EXPECT_GE(t.back(), hi);
    const double step = t[1] - t[0];
    EXPECT_TRUE(nice_step(step)) << step;
    for (size_t i = 1; i < t.size(); ++i) EXPECT_NEAR(t[i] - t[i - 1], step, step * 1e-9);
    for (double v : t) {
      const std::string label = tick_label(v, step);
      EXPECT_EQ(label.find('e'), std::string::npos) << label << " for " << lo << ".." << hi;
      EXPECT_LE(label.size(), 8u) << label;
    }
  }
  std::vector<std::string> labels;
  const std::vector<double> pendulum = nice_ticks(-1523.7, -143.2);
  for (double v : pendulum) labels.push_back(tick_label(v, pendulum[1] - pendulum[0]));
  EXPECT_EQ(labels, (std::vector<std::string>{"-1600", "-1400", "-1200", "-1000", "-800", "-600",
                                              "-400", "-200", "0"}));
  const std::vector<double> small = nice_ticks(0, 0.3);
  EXPECT_EQ(small[3], 0.15);  // the double nearest 0.15, no 0.15000000000000002
  EXPECT_EQ(tick_label(small[3], 0.05), "0.15");
  const std::vector<double> steps = nice_ticks(0, 23'456'789);
  EXPECT_EQ(tick_label(steps[1], steps[1] - steps[0]), "5M");
  EXPECT_EQ(tick_label(250'000, 50'000), "250k");
  EXPECT_EQ(tick_label(1'500'000, 500'000), "1.5M");
}

std::string metrics_line(double steps, double uptime, double ret, int count, double target,
                         const std::string& eval = "") {
  std::ostringstream out;
  out << "{\"run_name\": \"r\", \"uptime_s\": " << uptime << ", \"env_steps\": " << steps
      << ", \"episode_return_mean\": " << ret << ", \"episode_return_count\": " << count
      << ", \"local_env_steps\": 7" << eval << ", \"target_return\": " << target << "}";
  return out.str();
}

std::vector<std::string> all(const std::string& text, const std::string& pattern) {
  std::vector<std::string> out;
  const std::regex re(pattern);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
       ++it) {
    out.push_back((*it)[1]);
  }
  return out;
}

TEST(CurvesTest, TheSvgHasLabelsTicksTargetAndBothCurvesOfTheWholeRun) {
  const std::string dir = ::testing::TempDir() + "/curves-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  {
    std::ofstream out(dir + "/metrics.jsonl");
    out << metrics_line(0, 1, 0, 0, -200) << "\n";  // no episode yet: no point
    for (int i = 1; i <= 10; ++i) {
      const std::string eval =
          i >= 5 ? ", \"eval_return_mean\": -900, \"eval_episodes\": 10, \"eval_env_steps\": 5"
                 : ", \"eval_return_mean\": 0, \"eval_episodes\": 0, \"eval_env_steps\": 0";
      out << metrics_line(i * 1000, i, -1500 + 100 * i, 100, -200, eval) << "\n";
    }
    // The learner was killed; the resumed one went back to its checkpoint at
    // 8000 steps and its uptime starts again.
    for (int i = 1; i <= 5; ++i) {
      const std::string eval =
          ", \"eval_return_mean\": " + std::to_string(-700 + 100 * i) +
          ", \"eval_episodes\": 10, \"eval_env_steps\": " + std::to_string(100 + i);
      out << metrics_line(8000 + i * 1000, i, -700 + 50 * i, 100, -200, eval) << "\n";
    }
  }
  CurveHistory history;
  history.add_file(dir + "/metrics.jsonl");
  const Curves& c = history.curves();
  ASSERT_EQ(c.train.size(), 8u + 5u) << "steps 1000..8000, then the resumed 9000..13000";
  EXPECT_EQ(c.train[7].env_steps, 8000);
  EXPECT_EQ(c.train[8].env_steps, 9000);
  EXPECT_NEAR(c.train[8].seconds, 11, 1e-9) << "the first learner's 10 s, then 1 s more";
  ASSERT_EQ(c.eval.size(), 1u + 5u) << "one evaluation kept from the first learner, five new";
  EXPECT_EQ(c.eval[0].return_mean, -900);
  EXPECT_EQ(c.target, -200);

  write_curves_svg(dir + "/curves.svg", "r on pendulum", c);
  std::ifstream in(dir + "/curves.svg");
  const std::string svg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(all(svg, R"re(class="label x"[^>]*>([^<]*)<)re"),
            (std::vector<std::string>{"env steps", "wall time (s)"}));
  EXPECT_EQ(all(svg, R"re(class="label y"[^>]*>([^<]*)<)re"),
            (std::vector<std::string>{"mean episode return", "mean episode return"}));
  const std::vector<std::string> y_ticks = all(svg, R"re(class="tick y"[^>]*>([^<]*)<)re");
  ASSERT_FALSE(y_ticks.empty());
  for (const std::string& t : y_ticks) {
    EXPECT_TRUE(std::regex_match(t, std::regex(R"(-?\d+)"))) << t;
    EXPECT_EQ(std::stoi(t) % 100, 0) << t;
  }
  EXPECT_EQ(y_ticks.back(), "-200") << "the axis reaches the target";
  const std::vector<std::string> x_ticks = all(svg, R"re(class="tick x"[^>]*>([^<]*)<)re");
  EXPECT_NE(std::find(x_ticks.begin(), x_ticks.end(), "14k"), x_ticks.end()) << svg;
  EXPECT_EQ(all(svg, R"re(<line (class="target"))re").size(), 2u) << "in both panels";
  const std::vector<std::string> train = all(svg, R"re(class="train"[^>]*points="([^"]*)")re");
  const std::vector<std::string> eval = all(svg, R"re(class="eval"[^>]*points="([^"]*)")re");
  ASSERT_EQ(train.size(), 2u);
  ASSERT_EQ(eval.size(), 2u);
  EXPECT_EQ(std::count(train[0].begin(), train[0].end(), ','), 13);
  EXPECT_EQ(std::count(eval[0].begin(), eval[0].end(), ','), 6);
  EXPECT_EQ(all(svg, R"re(<circle (class="eval-point"))re").size(), 2u * 6u)
      << "a marker per evaluation in each panel: one evaluation alone shows too";
  EXPECT_NE(svg.find(">evaluation<"), std::string::npos);
  EXPECT_NE(svg.find(">target -200<"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(CurvesTest, WithoutEvaluationOrTargetOnlyTheTrainingCurveIsDrawn) {
  CurveHistory history;
  history.add_line(metrics_line(1000, 1, 20, 10, 0));
  history.add_line(metrics_line(2000, 2, 30, 10, 0));
  const std::string path = ::testing::TempDir() + "/curves-plain-" + std::to_string(getpid());
  write_curves_svg(path, "r", history.curves());
  std::ifstream in(path);
  const std::string svg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(svg.find("class=\"train\""), std::string::npos);
  EXPECT_EQ(svg.find("class=\"eval\""), std::string::npos);
  EXPECT_EQ(svg.find("class=\"eval-point\""), std::string::npos);
  EXPECT_EQ(svg.find("class=\"target\""), std::string::npos);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace pronghorn::learner

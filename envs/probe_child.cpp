// The child's side of envs/plugin_probe.h: tries the plugin and reports each
// stage before it begins, so that the parent can name the call a crash or a
// hang happened in.
#include <errno.h>
#include <fmt/format.h>
#include <unistd.h>

#include <exception>
#include <memory>
#include <vector>

#include "core/error.h"
#include "envs/plugin.h"
#include "envs/plugin_probe.h"
#include "envs/probe_report.h"

namespace pronghorn::envs {
namespace {

// Whole lines, so that the parent never reads half of one from a child
// that died. A parent that is gone ends the child with SIGPIPE: fine.
void write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// One step with a valid action: 0, or the middle of each continuous range.
void step_once(BatchEnv& env) {
  const EnvSpec& spec = env.spec();
  std::vector<uint8_t> obs(spec.obs_bytes()), final_obs(spec.obs_bytes());
  float reward = 0;
  uint8_t terminated = 0, truncated = 0;
  std::vector<float> continuous(spec.action_size);
  for (int64_t d = 0; d < spec.action_size && spec.action_kind == ActionKind::kContinuous; ++d) {
    continuous[d] = spec.action_low[d] / 2 + spec.action_high[d] / 2;
  }
  const int32_t discrete = 0;
  env.step(spec.action_kind == ActionKind::kDiscrete ? static_cast<const void*>(&discrete)
                                                     : continuous.data(),
           {obs.data(), &reward, &terminated, &truncated, final_obs.data()});
}

}  // namespace

std::vector<std::string> ProbeRequest::args() const {
  std::vector<std::string> out = {"--plugin", plugin, "--max-episode-steps",
                                  std::to_string(max_episode_steps)};
  if (!env_name.empty()) out.insert(out.end(), {"--env", env_name});
  if (list) out.push_back("--list");
  return out;
}

void serve_probe(const ProbeRequest& request, int report_fd) {
  auto stage = [&](const char* name) { write_all(report_fd, fmt::format("stage {}\n", name)); };
  try {
    stage("open");
    std::shared_ptr<PluginLibrary> library = PluginLibrary::open(request.plugin);
    std::vector<EnvSpec> specs = library->specs();
    if (!request.list) {
      const bool only_one = specs.size() == 1;
      write_all(report_fd, fmt::format("env {}\n", only_one ? specs[0].name : request.env_name));
      stage("create");
      std::unique_ptr<BatchEnv> env =
          library->make_env(request.env_name, 1, 0, request.max_episode_steps);
      std::vector<uint8_t> obs(env->spec().obs_bytes());
      stage("reset");
      env->reset(obs.data());
      stage("step");
      step_once(*env);
      specs = {env->spec()};
      stage("destroy");
      env.reset();
    }
    std::string report;
    for (const EnvSpec& spec : specs) report += encode_spec(spec) + "\n";
    write_all(report_fd, report);
    stage("unload");
    library.reset();
  } catch (const UsageError& e) {
    write_all(report_fd, fmt::format("usage {}\n", e.what()));
    throw;
  } catch (const std::exception& e) {
    write_all(report_fd, fmt::format("error {}\n", e.what()));
    throw;
  }
}

}  // namespace pronghorn::envs

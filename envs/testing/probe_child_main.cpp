// The child of envs/plugin_probe.h for envs_test, which has no `pronghorn`
// binary to run: serve_probe behind the same arguments as `pronghorn
// probe-env` (tools/cmd_probe_env.cpp).
#include <cstdio>
#include <exception>
#include <string>

#include "envs/plugin_probe.h"

int main(int argc, char** argv) {
  pronghorn::envs::ProbeRequest request;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--list")
      request.list = true;
    else if (arg == "--plugin" && has_value)
      request.plugin = argv[++i];
    else if (arg == "--env" && has_value)
      request.env_name = argv[++i];
    else if (arg == "--max-episode-steps" && has_value)
      request.max_episode_steps = std::stoll(argv[++i]);
    else
      return 2;
  }
  try {
    pronghorn::envs::serve_probe(request, pronghorn::envs::kProbeReportFd);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "probe_child: %s\n", e.what());
    return 1;
  }
  return 0;
}

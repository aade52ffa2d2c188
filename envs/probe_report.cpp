#include "envs/probe_report.h"

#include <fmt/format.h>

#include <cstdlib>
#include <sstream>

#include "core/error.h"

namespace pronghorn::envs {

std::string encode_spec(const EnvSpec& spec) {
  std::string line = fmt::format("spec {} {} {} {} {}", static_cast<int>(spec.obs_dtype),
                                 spec.obs_shape.size(), fmt::join(spec.obs_shape, " "),
                                 static_cast<int>(spec.action_kind), spec.action_size);
  for (float low : spec.action_low) line += fmt::format(" {}", low);
  for (float high : spec.action_high) line += fmt::format(" {}", high);
  return line + fmt::format(" {} {} {}", spec.max_episode_steps, spec.target_return, spec.name);
}

EnvSpec decode_spec(std::string_view line) {
  std::istringstream in{std::string(line)};
  auto fail = [&] { throw Error(fmt::format("env probe: malformed spec line \"{}\"", line)); };
  std::string tag;
  int dtype = -1, kind = -1;
  size_t rank = 0;
  EnvSpec spec;
  if (!(in >> tag >> dtype >> rank) || tag != "spec" || rank > 16) fail();
  spec.obs_dtype = static_cast<Dtype>(dtype);
  spec.obs_shape.resize(rank);
  for (int64_t& d : spec.obs_shape) {
    if (!(in >> d)) fail();
  }
  if (!(in >> kind >> spec.action_size)) fail();
  spec.action_kind = static_cast<ActionKind>(kind);
  if (spec.action_kind == ActionKind::kContinuous) {
    // Read as text and converted by strtof: exact for the shortest form fmt wrote.
    std::string word;
    for (auto* bounds : {&spec.action_low, &spec.action_high}) {
      for (int64_t d = 0; d < spec.action_size && d < 1024; ++d) {
        if (!(in >> word)) fail();
        bounds->push_back(std::strtof(word.c_str(), nullptr));
      }
    }
  }
  if (!(in >> spec.max_episode_steps >> spec.target_return) || in.get() != ' ') fail();
  std::getline(in, spec.name);
  if (spec.name.empty()) fail();
  return spec;
}

ProbeReport parse_probe_report(std::string_view text) {
  ProbeReport report;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    if (line.starts_with("error ") || line.starts_with("usage ")) {
      // The message is the rest of the report: it may hold newlines of its own.
      std::string_view message = text.substr(6);
      while (message.ends_with('\n')) message.remove_suffix(1);
      report.error = std::string(message);
      report.usage_error = line.starts_with("usage ");
      break;
    }
    if (line.starts_with("stage ")) report.stage = std::string(line.substr(6));
    if (line.starts_with("env ")) report.env = std::string(line.substr(4));
    if (line.starts_with("spec ")) report.specs.push_back(decode_spec(line));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return report;
}

}  // namespace pronghorn::envs

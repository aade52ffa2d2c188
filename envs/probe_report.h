// The report a plugin probe's child writes to its parent
// (envs/plugin_probe.h): text, one line per record, read whole at the end.
//   stage CALL      written before each call into the plugin (open, create,
//                   reset, step, destroy, unload): the last one is where a
//                   crash or a hang happened
//   env NAME        the env it tries (a one-env plugin's own, whatever asked)
//   spec FIELDS     an env spec (encode_spec)
//   error MESSAGE   the Error the child threw: the rest of the report
//   usage MESSAGE   the same for a UsageError
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "envs/env.h"

namespace pronghorn::envs {

// One line, without the newline: "spec DTYPE RANK SHAPE... KIND SIZE
// [LOW... HIGH...] MAX_STEPS NAME"; floats in their shortest exact form.
std::string encode_spec(const EnvSpec& spec);
// Throws Error on a line encode_spec did not write.
EnvSpec decode_spec(std::string_view line);

struct ProbeReport {
  std::string stage;  // the last stage begun; "" before any
  std::string env;    // the env tried; "" when none
  std::vector<EnvSpec> specs;
  std::optional<std::string> error;  // the child's error message
  bool usage_error = false;          // it was a UsageError
};
ProbeReport parse_probe_report(std::string_view text);

}  // namespace pronghorn::envs

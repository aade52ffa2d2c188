// A free-form table of options in a config (e.g. an env's `[env.options]`,
// passed on as keyword arguments): name → value, the value kept as its TOML
// text (a string, an integer, a float, a boolean, or an array of those), so
// it reaches its reader with its type. Names are identifiers ([A-Za-z_]
// [A-Za-z0-9_]*); core/config_kinds.h reads, checks and writes the table.
#pragma once

#include <map>
#include <string>

namespace pronghorn {

using OptionTable = std::map<std::string, std::string>;

}  // namespace pronghorn

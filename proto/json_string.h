// `text` as a JSON string: quoted, with quotes, backslashes and control
// characters escaped. The one escaping of status_json and `pronghorn eval --json`.
#pragma once

#include <string>

namespace pronghorn {

std::string json_string(const std::string& text);

}  // namespace pronghorn

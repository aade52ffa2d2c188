// A Status as one flat JSON object with snake_case keys: nested messages
// become prefixes (`episode_return.mean` → "episode_return_mean"). The one
// format of a metrics.jsonl line and of `pronghorn status --json`. The one
// repeated field, `ranks`, is an array of such objects.
#pragma once

#include <string>

#include "proto/pronghorn.pb.h"

namespace pronghorn {

std::string status_json(const v1::Status& status);

}  // namespace pronghorn

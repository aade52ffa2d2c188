// A Status as one flat JSON object with snake_case keys: nested messages
// become prefixes (`episode_return.mean` → "episode_return_mean"). The one
// format of a metrics.jsonl line and of `pronghorn status --json`. The one
// repeated field, `ranks`, is an array of such objects; the one map,
// `episode_info`, an object of its keys.
#pragma once

#include <map>
#include <string>

#include "proto/pronghorn.pb.h"

namespace pronghorn {

std::string status_json(const v1::Status& status);

// Map field `f` of `m` as a sorted map; `f` must be a map<string, double>
// (Status.episode_info, its only map), else std::logic_error.
std::map<std::string, double> string_double_map(const google::protobuf::Message& m,
                                                const google::protobuf::FieldDescriptor* f);

}  // namespace pronghorn

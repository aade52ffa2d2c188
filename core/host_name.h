// This machine's name as gethostname(2) gives it; "" when it cannot be read
// (each caller says what stands in: a placement's "unknown", TensorBoard's
// "localhost", an actor-only node's refusal).
#pragma once

#include <string>

namespace pronghorn {

std::string host_name();

}  // namespace pronghorn

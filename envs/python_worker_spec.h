// The spec line of an env worker (envs/python/pronghorn_worker.py), read and
// checked: a buggy or hostile worker's spec must not make the actor map,
// copy or trust absurd sizes. Its own file so that python_worker.cpp keeps
// to the process and the protocol.
#pragma once

#include <toml++/toml.h>

#include <cstdint>
#include <string>
#include <utility>

#include "core/env_spec.h"
#include "envs/python_worker.h"

namespace pronghorn::envs {

// The spec and memory layout a worker sent for `k` envs of env `name`;
// Error naming what does not hold together.
std::pair<EnvSpec, PythonWorker::Layout> read_worker_spec(const toml::table& s,
                                                          const std::string& name, int64_t k);

}  // namespace pronghorn::envs

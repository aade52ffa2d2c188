// Loading user envs from a shared library through the C ABI in
// envs/pronghorn_env.h. open() checks everything it can before any env runs
// (the file, the entry symbol, the ABI version, every function and every
// spec) and throws Error with one message naming the library and what is
// wrong; a plugin's own errors at create/reset/step come back the same way.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "envs/env.h"
#include "envs/pronghorn_env.h"

namespace pronghorn::envs {

class PluginLibrary : public std::enable_shared_from_this<PluginLibrary> {
 public:
  // dlopen()s `path` and validates it. The library stays loaded while this
  // object or any env made from it lives.
  static std::shared_ptr<PluginLibrary> open(const std::string& path);
  ~PluginLibrary();
  PluginLibrary(const PluginLibrary&) = delete;
  PluginLibrary& operator=(const PluginLibrary&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<EnvSpec>& specs() const { return specs_; }

  // The env called `name`; when the library offers only one env, that one
  // whatever the name. max_episode_steps 0 keeps the env's own.
  std::unique_ptr<BatchEnv> make_env(const std::string& name, int64_t num_envs, uint64_t seed,
                                     int64_t max_episode_steps);

 private:
  PluginLibrary(std::string path, void* handle, const pronghorn_env_plugin* table);

  std::string path_;
  void* handle_;                       // from dlopen
  const pronghorn_env_plugin* table_;  // the plugin's static table
  std::vector<EnvSpec> specs_;         // validated copies of table_->specs
};

}  // namespace pronghorn::envs

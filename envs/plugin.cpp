#include "envs/plugin.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <set>

#include "core/error.h"

namespace pronghorn::envs {
namespace {

constexpr size_t kErrorSize = 512;
constexpr int64_t kMaxObsElements = int64_t{1} << 26;

[[noreturn]] void fail_plugin(const std::string& path, const std::string& what) {
  throw Error(fmt::format("env plugin {}: {}", path, what));
}

// A spec from the plugin at `path`, checked field by field.
EnvSpec import_spec(const pronghorn_env_spec& raw, int index, const std::string& path) {
  auto fail = [&](const std::string& what) { fail_plugin(path, what); };
  EnvSpec spec;
  if (raw.name == nullptr || raw.name[0] == '\0') fail(fmt::format("spec {} has no name", index));
  spec.name = raw.name;
  auto bad = [&](const std::string& what) { fail(fmt::format("env \"{}\": {}", spec.name, what)); };

  if (raw.obs_dtype != PRONGHORN_DTYPE_FLOAT32 && raw.obs_dtype != PRONGHORN_DTYPE_UINT8) {
    bad(fmt::format("obs_dtype = {}: expected PRONGHORN_DTYPE_FLOAT32 or _UINT8", raw.obs_dtype));
  }
  spec.obs_dtype = static_cast<Dtype>(raw.obs_dtype);
  if (raw.obs_rank < 1 || raw.obs_rank > PRONGHORN_ENV_MAX_RANK) {
    bad(fmt::format("obs_rank = {}: expected 1 to {}", raw.obs_rank, PRONGHORN_ENV_MAX_RANK));
  }
  for (int d = 0; d < raw.obs_rank; ++d) {
    if (raw.obs_shape[d] < 1 || raw.obs_shape[d] > kMaxObsElements) {
      bad(fmt::format("obs_shape[{}] = {}: expected 1 to {}", d, raw.obs_shape[d],
                      kMaxObsElements));
    }
    spec.obs_shape.push_back(raw.obs_shape[d]);
  }
  if (spec.obs_elements() > kMaxObsElements) {
    bad(fmt::format("observation of {} elements: expected at most {}", spec.obs_elements(),
                    kMaxObsElements));
  }

  spec.action_size = raw.action_size;
  if (raw.action_kind == PRONGHORN_ACTION_DISCRETE) {
    spec.action_kind = ActionKind::kDiscrete;
    if (raw.action_size < 1 || raw.action_size > INT32_MAX) {
      bad(fmt::format("action_size = {}: expected 1 to {} discrete actions", raw.action_size,
                      INT32_MAX));
    }
  } else if (raw.action_kind == PRONGHORN_ACTION_CONTINUOUS) {
    spec.action_kind = ActionKind::kContinuous;
    if (raw.action_size < 1 || raw.action_size > PRONGHORN_ENV_MAX_ACTION_DIMS) {
      bad(fmt::format("action_size = {}: expected 1 to {} continuous dims", raw.action_size,
                      PRONGHORN_ENV_MAX_ACTION_DIMS));
    }
    if (raw.action_low == nullptr || raw.action_high == nullptr) {
      bad("continuous actions need action_low and action_high");
    }
    for (int64_t d = 0; d < raw.action_size; ++d) {
      float low = raw.action_low[d], high = raw.action_high[d];
      if (!std::isfinite(low) || !std::isfinite(high) || !(low < high)) {
        bad(fmt::format("action bounds [{}, {}] of dim {}: expected finite low < high", low, high,
                        d));
      }
      spec.action_low.push_back(low);
      spec.action_high.push_back(high);
    }
  } else {
    bad(fmt::format("action_kind = {}: expected PRONGHORN_ACTION_DISCRETE or _CONTINUOUS",
                    raw.action_kind));
  }
  if (raw.max_episode_steps < 0) {
    bad(fmt::format("max_episode_steps = {}: expected 0 (none) or more", raw.max_episode_steps));
  }
  spec.max_episode_steps = raw.max_episode_steps;
  return spec;
}

// K envs of one plugin spec; every call goes through the plugin's table.
class PluginEnv final : public BatchEnv {
 public:
  PluginEnv(EnvSpec spec, int64_t num_envs, std::shared_ptr<PluginLibrary> library,
            const pronghorn_env_plugin* table, pronghorn_env* env)
      : BatchEnv(std::move(spec), num_envs), library_(std::move(library)), table_(table),
        env_(env) {}
  ~PluginEnv() override { table_->destroy(env_); }

 private:
  void reset_unchecked(void* obs) override {
    if (table_->reset(env_, obs, error_.data(), error_.size()) != 0) fail("reset");
  }

  void step_unchecked(const void* actions, const StepOutput& out) override {
    if (table_->step(env_, actions, out.obs, out.rewards, out.terminated, out.truncated,
                     out.final_obs, error_.data(), error_.size()) != 0) {
      fail("step");
    }
  }

  [[noreturn]] void fail(const char* call) {
    error_.back() = '\0';
    throw Error(fmt::format("env plugin {} (env \"{}\"): {} failed: {}", library_->path(),
                            spec().name, call, error_[0] ? error_.data() : "no message"));
  }

  std::shared_ptr<PluginLibrary> library_;
  const pronghorn_env_plugin* table_;
  pronghorn_env* env_;
  std::array<char, kErrorSize> error_{};
};

}  // namespace

std::shared_ptr<PluginLibrary> PluginLibrary::open(const std::string& path) {
  auto fail = [&](const std::string& what) { fail_plugin(path, what); };
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) fail("no such file");
  // A path without a slash would make dlopen search the library path instead.
  std::string load_path = path.find('/') == std::string::npos ? "./" + path : path;
  void* handle = dlopen(load_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) fail(fmt::format("cannot load: {}", dlerror()));
  auto entry = reinterpret_cast<pronghorn_env_plugin_entry_fn>(dlsym(handle, PRONGHORN_ENV_ENTRY));
  if (entry == nullptr) {
    dlclose(handle);
    fail(fmt::format("missing symbol {}: is this a Pronghorn env plugin?", PRONGHORN_ENV_ENTRY));
  }
  const pronghorn_env_plugin* table = entry();
  // From here on the PluginLibrary owns the handle, also when validation throws.
  std::shared_ptr<PluginLibrary> library(new PluginLibrary(path, handle, table));
  if (table == nullptr) fail(fmt::format("{}() returned NULL", PRONGHORN_ENV_ENTRY));
  if (table->abi_version != PRONGHORN_ENV_ABI_VERSION) {
    fail(fmt::format("built for env ABI version {}; this Pronghorn speaks version {}",
                     table->abi_version, PRONGHORN_ENV_ABI_VERSION));
  }
  const std::pair<const char*, bool> functions[] = {{"create", table->create != nullptr},
                                                    {"reset", table->reset != nullptr},
                                                    {"step", table->step != nullptr},
                                                    {"destroy", table->destroy != nullptr}};
  for (const auto& [name, present] : functions) {
    if (!present) fail(fmt::format("missing function {} in its table", name));
  }
  if (table->num_specs < 1 || table->num_specs > 1024 || table->specs == nullptr) {
    fail(fmt::format("num_specs = {}: expected 1 to 1024 specs", table->num_specs));
  }
  std::set<std::string> names;
  for (int i = 0; i < table->num_specs; ++i) {
    library->specs_.push_back(import_spec(table->specs[i], i, path));
    if (!names.insert(library->specs_.back().name).second) {
      fail(fmt::format("two envs are called \"{}\"", library->specs_.back().name));
    }
  }
  return library;
}

PluginLibrary::PluginLibrary(std::string path, void* handle, const pronghorn_env_plugin* table)
    : path_(std::move(path)), handle_(handle), table_(table) {}

PluginLibrary::~PluginLibrary() { dlclose(handle_); }

std::unique_ptr<BatchEnv> PluginLibrary::make_env(const std::string& name, int64_t num_envs,
                                                  uint64_t seed, int64_t max_episode_steps) {
  PRONGHORN_CHECK(num_envs >= 1, "env plugin ", path_, ": num_envs = ", num_envs,
                  ": expected at least 1");
  int index = -1;
  for (size_t i = 0; i < specs_.size(); ++i) {
    if (specs_[i].name == name) index = static_cast<int>(i);
  }
  if (index < 0 && specs_.size() == 1) index = 0;
  if (index < 0) {
    std::vector<std::string> names;
    for (const EnvSpec& spec : specs_) names.push_back(spec.name);
    throw UsageError(fmt::format("env.name = \"{}\": env plugin {} offers {}", name, path_,
                                 fmt::join(names, ", ")));
  }
  std::array<char, kErrorSize> error{};
  pronghorn_env* env =
      table_->create(index, num_envs, seed, max_episode_steps, error.data(), error.size());
  error.back() = '\0';
  if (env == nullptr) {
    throw Error(fmt::format("env plugin {} (env \"{}\"): create failed: {}", path_,
                            specs_[index].name, error[0] ? error.data() : "no message"));
  }
  EnvSpec spec = specs_[index];
  if (max_episode_steps > 0) spec.max_episode_steps = max_episode_steps;
  return std::make_unique<PluginEnv>(std::move(spec), num_envs, shared_from_this(), table_, env);
}

}  // namespace pronghorn::envs

#include "envs/plugin.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <set>
#include <utility>

#include "core/error.h"
#include "envs/ended_rows.h"
#include "envs/guarded_buffer.h"

namespace pronghorn::envs {
namespace {

constexpr size_t kErrorSize = 512;
constexpr int64_t kMaxObsElements = int64_t{1} << 26;

[[noreturn]] void fail_plugin(const std::string& path, const std::string& what) {
  throw Error(fmt::format("env plugin {}: {}", path, what));
}

// The name at `name`, or "" when it is not 1 to PRONGHORN_ENV_MAX_NAME
// printable ASCII characters (garbage past the end of a specs array rarely is).
std::string import_name(const char* name) {
  if (name == nullptr) return "";
  const size_t length = strnlen(name, PRONGHORN_ENV_MAX_NAME + 1);
  if (length > PRONGHORN_ENV_MAX_NAME) return "";
  for (size_t i = 0; i < length; ++i) {
    if (name[i] < 0x20 || name[i] > 0x7e) return "";
  }
  return std::string(name, length);
}

// A spec from the plugin at `path`, checked field by field: the numbers
// first and the pointers last, so that a spec of garbage (num_specs larger
// than the array) is refused before anything is read through it.
EnvSpec import_spec(const pronghorn_env_spec& raw, int index, int num_specs,
                    const std::string& path) {
  EnvSpec spec;
  auto bad = [&](const std::string& what) {
    const std::string hint =
        index > 0 ? fmt::format(" (does the specs array hold num_specs = {} entries?)", num_specs)
                  : "";
    fail_plugin(path, fmt::format("spec {}: {}{}", index, what, hint));
  };

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
  } else {
    bad(fmt::format("action_kind = {}: expected PRONGHORN_ACTION_DISCRETE or _CONTINUOUS",
                    raw.action_kind));
  }
  if (raw.max_episode_steps < 0) {
    bad(fmt::format("max_episode_steps = {}: expected 0 (none) or more", raw.max_episode_steps));
  }
  spec.max_episode_steps = raw.max_episode_steps;
  if (spec.action_kind == ActionKind::kContinuous) {
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
  }
  spec.name = import_name(raw.name);
  if (spec.name.empty()) {
    bad(fmt::format("name: expected 1 to {} printable ASCII characters", PRONGHORN_ENV_MAX_NAME));
  }
  return spec;
}

// K envs of one plugin spec; every call goes through the plugin's table. The
// plugin writes into guarded buffers of this object's own (envs/guarded_buffer.h),
// and what it wrote is checked (guards, flags) before it is copied out to
// the caller: a faulty plugin is an Error, never bad bytes in a ring slot.
class PluginEnv final : public BatchEnv {
 public:
  PluginEnv(EnvSpec spec, int64_t num_envs, std::shared_ptr<PluginLibrary> library,
            const pronghorn_env_plugin* table, pronghorn_env* env)
      : BatchEnv(std::move(spec), num_envs),
        library_(std::move(library)),
        table_(table),
        env_(env),
        obs_(this->spec().obs_bytes() * num_envs),
        final_obs_(this->spec().obs_bytes() * num_envs),
        rewards_(sizeof(float) * num_envs),
        terminated_(num_envs),
        truncated_(num_envs),
        error_(kErrorSize) {}
  ~PluginEnv() override { table_->destroy(env_); }

  std::string label() const override {
    return fmt::format("env {} (plugin {})", spec().name, library_->path());
  }

 private:
  void reset_unchecked(void* obs) override {
    error()[0] = '\0';
    const int status = table_->reset(env_, obs_.data(), error(), kErrorSize);
    check_guards("reset", {{&obs_, "observation"}, {&error_, "error"}});
    if (status != 0) fail("reset");
    std::memcpy(obs, obs_.data(), obs_.size());
  }

  void step_unchecked(const void* actions, const StepOutput& out) override {
    const bool final_obs = out.final_obs != nullptr;
    error()[0] = '\0';
    const int status =
        table_->step(env_, actions, obs_.data(), rewards(), terminated(), truncated(),
                     final_obs ? final_obs_.data() : nullptr, error(), kErrorSize);
    check_guards("step", {{&obs_, "observation"},
                          {&rewards_, "rewards"},
                          {&terminated_, "terminated"},
                          {&truncated_, "truncated"},
                          {&final_obs_, "final observation"},
                          {&error_, "error"}});
    if (status != 0) fail("step");
    check_flags();
    const int64_t k = num_envs();
    std::memcpy(out.obs, obs_.data(), obs_.size());
    std::memcpy(out.rewards, rewards(), rewards_.size());
    std::memcpy(out.terminated, terminated(), k);
    std::memcpy(out.truncated, truncated(), k);
    if (!final_obs) return;
    // Only ended episodes' rows are the plugin's to write; the others stay the caller's.
    const size_t row = spec().obs_bytes();
    for_each_ended(terminated(), truncated(), k, [&](int64_t i) {
      std::memcpy(static_cast<uint8_t*>(out.final_obs) + i * row,
                  static_cast<const uint8_t*>(final_obs_.data()) + i * row, row);
    });
  }

  // A write past a buffer's end may have corrupted the plugin's own state, so
  // this is checked before anything the call returned is believed.
  void check_guards(const char* call,
                    std::initializer_list<std::pair<const GuardedBuffer*, const char*>> buffers) {
    for (const auto& [buffer, name] : buffers) {
      if (buffer->front_intact() && buffer->back_intact()) continue;
      throw Error(fmt::format(
          "{}: {} wrote {} its {} buffer ({} bytes for {} envs); see the buffer contract in "
          "pronghorn_env.h",
          label(), call, buffer->back_intact() ? "before the start of" : "past the end of", name,
          buffer->size(), num_envs()));
    }
  }

  // One pass that vectorises; the slow path only finds the row.
  void check_flags() const {
    const int64_t k = num_envs();
    const uint8_t* t = terminated();
    const uint8_t* u = truncated();
    uint8_t above = 0;
#pragma omp simd reduction(| : above)
    for (int64_t i = 0; i < k; ++i) above |= static_cast<uint8_t>((t[i] | u[i]) & 0xfe);
    if (above == 0) return;
    for (int64_t i = 0; i < k; ++i) {
      for (const auto& [name, flags] :
           {std::pair{"terminated", terminated()}, std::pair{"truncated", truncated()}}) {
        if (flags[i] > 1) {
          throw Error(fmt::format("{}: step returned {} = {} for env {}: expected 0 or 1", label(),
                                  name, flags[i], i));
        }
      }
    }
  }

  [[noreturn]] void fail(const char* call) {
    char* message = error();
    message[kErrorSize - 1] = '\0';
    throw Error(fmt::format("env plugin {} (env \"{}\"): {} failed: {}", library_->path(),
                            spec().name, call, message[0] ? message : "no message"));
  }

  float* rewards() { return static_cast<float*>(rewards_.data()); }
  uint8_t* terminated() { return static_cast<uint8_t*>(terminated_.data()); }
  const uint8_t* terminated() const { return static_cast<const uint8_t*>(terminated_.data()); }
  uint8_t* truncated() { return static_cast<uint8_t*>(truncated_.data()); }
  const uint8_t* truncated() const { return static_cast<const uint8_t*>(truncated_.data()); }
  char* error() { return static_cast<char*>(error_.data()); }

  std::shared_ptr<PluginLibrary> library_;
  const pronghorn_env_plugin* table_;
  pronghorn_env* env_;
  // What the plugin writes into, each [K, ...] as the caller's, plus guards.
  GuardedBuffer obs_, final_obs_, rewards_, terminated_, truncated_, error_;
};

}  // namespace

std::shared_ptr<PluginLibrary> PluginLibrary::open(const std::string& path) {
  auto fail = [&](const std::string& what) { fail_plugin(path, what); };
  std::error_code ec;
  // A path the user named that is not there is usage (exit 2), like a missing config.
  if (!std::filesystem::exists(path, ec)) {
    throw UsageError(fmt::format("env plugin {}: no such file", path));
  }
  if (!std::filesystem::is_regular_file(path, ec)) fail("not a regular file");
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
  if (table->num_specs < 1 || table->num_specs > PRONGHORN_ENV_MAX_SPECS ||
      table->specs == nullptr) {
    fail(fmt::format("num_specs = {}: expected 1 to {} specs", table->num_specs,
                     PRONGHORN_ENV_MAX_SPECS));
  }
  auto target_of = reinterpret_cast<pronghorn_env_plugin_target_fn>(
      dlsym(handle, PRONGHORN_ENV_TARGET));  // optional
  std::set<std::string> names;
  for (int i = 0; i < table->num_specs; ++i) {
    library->specs_.push_back(import_spec(table->specs[i], i, table->num_specs, path));
    if (double target = 0; target_of != nullptr && target_of(i, &target) != 0) {
      if (!std::isfinite(target)) {
        fail(fmt::format("{}({}) declared a target of {}: expected a finite return",
                         PRONGHORN_ENV_TARGET, i, target));
      }
      library->specs_.back().target_return = target;
    }
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

#include "learner/tensorboard_writer.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <system_error>
#include <utility>

#include "core/host_name.h"
#include "proto/status_json.h"
#include "proto/tensorboard.pb.h"

namespace pronghorn::learner {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// Byte-at-a-time table: a report's record is a few KB every few seconds, so
// the hardware instruction or slicing-by-8 would buy nothing here.
constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int bit = 0; bit < 8; ++bit) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrc32cTable = make_crc32c_table();

void append_le(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xFF);
}

std::string host_or_localhost() {
  const std::string name = host_name();
  return name.empty() ? "localhost" : name;
}

// The group of a top-level Status field on TensorBoard's page; nullptr: not
// a curve of its own (a constant of the run, or an evaluation's figure,
// written once per evaluation by evaluation_scalars()). A field added later
// lands in system/ until it is placed here.
const char* group_of(const std::string& field) {
  static const std::map<std::string, const char*, std::less<>> kGroups = {
      {"sps", "train"},
      {"learner_steps", "train"},
      {"policy_version", "train"},
      {"episodes", "train"},
      {"episode_return", "train"},
      {"loss", "train"},
      {"grad_norm", "train"},
      {"episode_length_mean", "train"},
      {"episode_info", "train"},
      {"learner_steps_per_s", "train"},
      {"learning_rate", "train"},
      {"optimizer_steps", "train"},
      {"local_env_steps", "cluster"},
      {"allreduce_s", "cluster"},
      {"ranks", "cluster"},
      {"remote_nodes", "cluster"},
      // Constants and the x axis: in metrics.jsonl, not curves.
      {"env_steps", nullptr},
      {"ring_slots", nullptr},
      {"last_checkpoint_unix_s", nullptr},
      {"metrics_port", nullptr},
      {"rank", nullptr},
      {"world_size", nullptr},
      {"total_steps", nullptr},
      {"target_return", nullptr},
      {"eval_return_mean", nullptr},
      {"eval_return_std", nullptr},
      {"eval_episodes", nullptr},
      {"eval_env_steps", nullptr}};
  const auto it = kGroups.find(field);
  return it == kGroups.end() ? "system" : it->second;
}

void append_scalars(std::vector<Scalar>& out, const Message& m, const std::string& prefix);

// The numbers of field `f` of `m`, tagged `prefix` + its name; rows of a
// repeated field by index.
void append_field(std::vector<Scalar>& out, const Message& m, const FieldDescriptor* f,
                  const std::string& prefix) {
  const auto* reflection = m.GetReflection();
  const std::string tag = prefix + f->name();
  if (f->is_map()) {  // Status.episode_info: a curve per key
    for (const auto& [key, value] : string_double_map(m, f)) {
      if (std::isfinite(value)) out.push_back({tag + "/" + key, value});
    }
    return;
  }
  if (f->is_repeated()) {  // messages only (Status.ranks, remote_nodes)
    for (int k = 0; k < reflection->FieldSize(m, f); ++k) {
      append_scalars(out, reflection->GetRepeatedMessage(m, f, k), fmt::format("{}/{}/", tag, k));
    }
    return;
  }
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_MESSAGE:
      append_scalars(out, reflection->GetMessage(m, f), tag + "/");
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      out.push_back({tag, static_cast<double>(reflection->GetUInt64(m, f))});
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      out.push_back({tag, static_cast<double>(reflection->GetUInt32(m, f))});
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      out.push_back({tag, static_cast<double>(reflection->GetInt64(m, f))});
      break;
    case FieldDescriptor::CPPTYPE_INT32:
      out.push_back({tag, static_cast<double>(reflection->GetInt32(m, f))});
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      // NaN is "none yet" (null in metrics.jsonl): no point, rather than a
      // NaN on the curve.
      if (std::isfinite(reflection->GetDouble(m, f))) {
        out.push_back({tag, reflection->GetDouble(m, f)});
      }
      break;
    case FieldDescriptor::CPPTYPE_FLOAT:
      out.push_back({tag, reflection->GetFloat(m, f)});
      break;
    default:
      break;  // strings and booleans: states and names, not curves
  }
}

void append_scalars(std::vector<Scalar>& out, const Message& m, const std::string& prefix) {
  const auto* descriptor = m.GetDescriptor();
  for (int i = 0; i < descriptor->field_count(); ++i)
    append_field(out, m, descriptor->field(i), prefix);
}

}  // namespace

uint32_t crc32c(std::string_view bytes) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : bytes) c = kCrc32cTable[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t mask_crc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

std::string tfrecord(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 16);
  append_le(out, payload.size(), 8);
  append_le(out, mask_crc(crc32c(out)), 4);
  out += payload;
  append_le(out, mask_crc(crc32c(payload)), 4);
  return out;
}

std::vector<Scalar> status_scalars(const v1::Status& status) {
  std::vector<Scalar> out;
  // A lone learner has no cluster to plot.
  const bool cluster = status.world_size() > 1 || status.remote_nodes_size() > 0;
  const auto* descriptor = status.GetDescriptor();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* f = descriptor->field(i);
    const char* group = group_of(f->name());
    if (group == nullptr || (!cluster && std::string_view(group) == "cluster")) continue;
    append_field(out, status, f, std::string(group) + "/");
  }
  return out;
}

std::vector<Scalar> evaluation_scalars(const v1::Status& status) {
  if (status.eval_episodes() == 0 || !std::isfinite(status.eval_return_mean())) return {};
  return {{"eval/return_mean", status.eval_return_mean()},
          {"eval/return_std", status.eval_return_std()},
          {"eval/episodes", static_cast<double>(status.eval_episodes())}};
}

TensorBoardWriter::TensorBoardWriter(std::string dir, double wall_time)
    : dir_(std::move(dir)),
      path_(fmt::format("{}/events.out.tfevents.{}.{}.{}", dir_,
                        static_cast<int64_t>(std::floor(wall_time)), host_or_localhost(),
                        getpid())) {
  open(wall_time);
}

TensorBoardWriter::~TensorBoardWriter() {
  if (fd_ >= 0) ::close(fd_);
}

bool TensorBoardWriter::open(double wall_time) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) {
    error_ = fmt::format("cannot create {}: {}", dir_, ec.message());
    return false;
  }
  // O_EXCL: a file of another start (same second, same pid: only in tests) is
  // never appended to; this one gets a suffix instead.
  const std::string base = path_;
  for (int n = 1; fd_ < 0; ++n) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0 && (errno != EEXIST || n > 100)) {
      error_ = fmt::format("cannot create {}: {}", path_, std::strerror(errno));
      path_ = base;
      return false;
    }
    if (fd_ < 0) path_ = fmt::format("{}.{}", base, n);
  }
  size_ = 0;
  tensorboard::Event first;
  first.set_wall_time(wall_time);
  first.set_file_version("brain.Event:2");
  if (!append(tfrecord(first.SerializeAsString()))) {
    // Nothing of this file is usable: the next write() starts it again.
    ::close(fd_);
    fd_ = -1;
    ::unlink(path_.c_str());
    path_ = base;
    return false;
  }
  return true;
}

bool TensorBoardWriter::write(int64_t step, double wall_time, const std::vector<Scalar>& scalars) {
  if (fd_ < 0 && !open(wall_time)) return false;
  tensorboard::Event event;
  event.set_wall_time(wall_time);
  event.set_step(step);
  auto* summary = event.mutable_summary();
  for (const Scalar& s : scalars) {
    auto* value = summary->add_value();
    value->set_tag(s.tag);
    value->set_simple_value(static_cast<float>(s.value));
  }
  return append(tfrecord(event.SerializeAsString()));
}

bool TensorBoardWriter::append(const std::string& record) {
  size_t done = 0;
  while (done < record.size()) {
    const ssize_t n = ::write(fd_, record.data() + done, record.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    error_ = fmt::format("cannot write {}: {}", path_,
                         n < 0 ? std::strerror(errno) : "no bytes written");
    // A torn record would end the file for every reader: cut it off.
    if (done > 0 && ::ftruncate(fd_, size_) != 0) {
      error_ += fmt::format(" (and cannot cut the partial record off: {})", std::strerror(errno));
    }
    return false;
  }
  size_ += static_cast<off_t>(record.size());
  return true;
}

}  // namespace pronghorn::learner

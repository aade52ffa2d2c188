#include "export/safetensors.h"

#include <fmt/format.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/files.h"
#include "proto/json_string.h"

namespace pronghorn::exporting {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors bytes are little-endian");

// Safetensors' own reader refuses headers past 100 MB.
constexpr uint64_t kMaxHeader = uint64_t{100} << 20;

const char* dtype_name(Dtype dtype) { return dtype == Dtype::kUInt8 ? "U8" : "F32"; }

Dtype dtype_named(const std::string& name, const std::string& tensor) {
  if (name == "F32") return Dtype::kFloat32;
  if (name == "U8") return Dtype::kUInt8;
  throw Error(fmt::format("tensor {}: dtype {} (Pronghorn reads F32 and U8)", tensor, name));
}

// A JSON number that is a whole, non-negative int64.
int64_t whole(const google::protobuf::Value& v, const std::string& what) {
  PRONGHORN_CHECK(v.kind_case() == google::protobuf::Value::kNumberValue, what, " is not a number");
  const double d = v.number_value();
  PRONGHORN_CHECK(d >= 0 && d <= 9.0e15 && std::floor(d) == d, what,
                  " is not a whole number from 0 to 9e15");
  return static_cast<int64_t>(d);
}

std::vector<int64_t> whole_list(const google::protobuf::Struct& entry, const char* key,
                                const std::string& tensor) {
  const auto& fields = entry.fields();
  const auto it = fields.find(key);
  PRONGHORN_CHECK(
      it != fields.end() && it->second.kind_case() == google::protobuf::Value::kListValue,
      "tensor ", tensor, ": no list \"", key, "\"");
  std::vector<int64_t> out;
  for (const auto& v : it->second.list_value().values())
    out.push_back(whole(v, fmt::format("tensor {}: an entry of \"{}\"", tensor, key)));
  return out;
}

struct Entry {
  NamedTensor tensor;
  uint64_t begin = 0, end = 0;
};

Entry entry_of(const std::string& name, const google::protobuf::Value& value) {
  PRONGHORN_CHECK(value.kind_case() == google::protobuf::Value::kStructValue, "tensor ", name,
                  ": not an object");
  const google::protobuf::Struct& s = value.struct_value();
  const auto dtype = s.fields().find("dtype");
  PRONGHORN_CHECK(dtype != s.fields().end() &&
                      dtype->second.kind_case() == google::protobuf::Value::kStringValue,
                  "tensor ", name, ": no string \"dtype\"");
  Entry e;
  e.tensor.name = name;
  e.tensor.dtype = dtype_named(dtype->second.string_value(), name);
  e.tensor.shape = whole_list(s, "shape", name);
  PRONGHORN_CHECK(e.tensor.shape.size() <= 8, "tensor ", name, ": rank ", e.tensor.shape.size(),
                  " (at most 8)");
  const std::vector<int64_t> offsets = whole_list(s, "data_offsets", name);
  PRONGHORN_CHECK(offsets.size() == 2 && offsets[0] <= offsets[1], "tensor ", name,
                  ": data_offsets is not [begin, end] with begin ≤ end");
  e.begin = static_cast<uint64_t>(offsets[0]);
  e.end = static_cast<uint64_t>(offsets[1]);
  double elements = 1;  // in double: a hostile shape must not wrap around
  for (int64_t d : e.tensor.shape) elements *= static_cast<double>(d);
  const double bytes = elements * static_cast<double>(dtype_bytes(e.tensor.dtype));
  PRONGHORN_CHECK(bytes == static_cast<double>(e.end - e.begin), "tensor ", name, ": shape ",
                  shape_text(e.tensor.shape), " of ", dtype_name(e.tensor.dtype), " takes ", bytes,
                  " bytes, its data_offsets ", e.end - e.begin);
  return e;
}

}  // namespace

std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

int64_t NamedTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const float* NamedTensor::floats() const {
  PRONGHORN_CHECK(dtype == Dtype::kFloat32, "tensor ", name, " is not F32");
  return reinterpret_cast<const float*>(bytes.data());
}

NamedTensor float_tensor(std::string name, std::vector<int64_t> shape, const float* values) {
  NamedTensor t{std::move(name), Dtype::kFloat32, std::move(shape), {}};
  t.bytes.assign(reinterpret_cast<const char*>(values), sizeof(float) * t.numel());
  return t;
}

const NamedTensor* Safetensors::find(const std::string& name) const {
  for (const NamedTensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::string encode_safetensors(const Safetensors& file) {
  std::string header = "{";
  uint64_t offset = 0;
  for (const NamedTensor& t : file.tensors) {
    PRONGHORN_CHECK(t.bytes.size() == static_cast<size_t>(t.numel()) * dtype_bytes(t.dtype),
                    "tensor ", t.name, ": its bytes do not match its shape");
    header +=
        fmt::format("{}{}: {{\"dtype\": \"{}\", \"shape\": [{}], \"data_offsets\": [{}, {}]}}",
                    header.size() > 1 ? ", " : "", json_string(t.name), dtype_name(t.dtype),
                    fmt::join(t.shape, ", "), offset, offset + t.bytes.size());
    offset += t.bytes.size();
  }
  if (!file.metadata.empty()) {
    header += fmt::format("{}\"__metadata__\": {{", header.size() > 1 ? ", " : "");
    bool first = true;
    for (const auto& [key, value] : file.metadata) {
      header += fmt::format("{}{}: {}", first ? "" : ", ", json_string(key), json_string(value));
      first = false;
    }
    header += "}";
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  const uint64_t length = header.size();
  std::memcpy(out.data(), &length, 8);
  out += header;
  for (const NamedTensor& t : file.tensors) out += t.bytes;
  return out;
}

Safetensors decode_safetensors(const std::string& bytes) {
  PRONGHORN_CHECK(bytes.size() >= 8, "shorter than the 8 bytes of its header length");
  uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);
  PRONGHORN_CHECK(length <= kMaxHeader && length <= bytes.size() - 8, "a header of ", length,
                  " bytes in a file of ", bytes.size());
  const std::string header = bytes.substr(8, length);
  google::protobuf::Struct json;
  const auto status = google::protobuf::util::JsonStringToMessage(header, &json);
  if (!status.ok()) {
    const std::string why = status.ToString();
    throw Error("its header is not a JSON object: " + why.substr(0, why.find('\n')));
  }
  const uint64_t data_at = 8 + length;
  const uint64_t data_size = bytes.size() - data_at;

  Safetensors out;
  std::vector<Entry> entries;
  for (const auto& [name, value] : json.fields()) {
    if (name == "__metadata__") {
      PRONGHORN_CHECK(value.kind_case() == google::protobuf::Value::kStructValue,
                      "__metadata__ is not an object");
      for (const auto& [key, v] : value.struct_value().fields()) {
        PRONGHORN_CHECK(v.kind_case() == google::protobuf::Value::kStringValue, "__metadata__.",
                        key, " is not a string");
        out.metadata[key] = v.string_value();
      }
      continue;
    }
    entries.push_back(entry_of(name, value));
  }
  // The byte ranges must tile the data exactly, as safetensors' own reader demands.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;  // empty ones first
  });
  uint64_t expected = 0;
  for (Entry& e : entries) {
    PRONGHORN_CHECK(e.begin == expected, "tensor ", e.tensor.name, " starts at byte ", e.begin,
                    " of the data, not at ", expected, " (ranges overlap or leave a gap)");
    PRONGHORN_CHECK(e.end <= data_size, "tensor ", e.tensor.name, " ends at byte ", e.end,
                    " of the data, past its ", data_size);
    e.tensor.bytes = bytes.substr(data_at + e.begin, e.end - e.begin);
    expected = e.end;
    out.tensors.push_back(std::move(e.tensor));
  }
  PRONGHORN_CHECK(expected == data_size, data_size - expected,
                  " bytes after the last tensor belong to none");
  return out;
}

void write_safetensors(const std::string& path, const Safetensors& file) {
  write_file_atomically(path, encode_safetensors(file));
}

Safetensors read_safetensors(const std::string& path) {
  const std::string bytes = read_file(path);
  try {
    return decode_safetensors(bytes);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: not a safetensors file Pronghorn reads: {}", path, e.what()));
  }
}

}  // namespace pronghorn::exporting

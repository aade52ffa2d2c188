// Safetensors files (the format of Hugging Face's `safetensors`): an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype,
// shape and byte range, then the tensors' raw little-endian bytes, row-major,
// back to back. What `pronghorn export` writes the weights as, and what
// `pronghorn eval --dump-forward` reads observations from and writes the
// network's outputs to. Only the dtypes Pronghorn's tensors have: F32, U8.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/env_spec.h"

namespace pronghorn::exporting {

struct NamedTensor {
  std::string name;
  Dtype dtype = Dtype::kFloat32;
  std::vector<int64_t> shape;
  std::string bytes;  // product(shape) × the dtype's size, little-endian (this machine's order)

  int64_t numel() const;
  const float* floats() const;  // F32 only
};

// "[2, 3]": a shape as errors name it.
std::string shape_text(const std::vector<int64_t>& shape);

// A float32 tensor of `shape` holding `values` (product(shape) floats).
NamedTensor float_tensor(std::string name, std::vector<int64_t> shape, const float* values);

struct Safetensors {
  std::vector<NamedTensor> tensors;             // in the order of their bytes
  std::map<std::string, std::string> metadata;  // "__metadata__": free-form strings

  // The tensor named `name`, or nullptr.
  const NamedTensor* find(const std::string& name) const;
};

// The file's bytes: the header padded with spaces to a multiple of 8 bytes,
// so that every tensor starts 8-byte aligned when the tensors' sizes allow.
std::string encode_safetensors(const Safetensors& file);

// The tensors of a safetensors file's bytes; Error naming what is wrong (a
// length past the file, JSON that does not parse, a dtype other than F32 or
// U8, byte ranges that overlap, leave gaps or disagree with the shape).
Safetensors decode_safetensors(const std::string& bytes);

void write_safetensors(const std::string& path, const Safetensors& file);
// `path`'s tensors; Error naming the file and what is wrong with it.
Safetensors read_safetensors(const std::string& path);

}  // namespace pronghorn::exporting

// Weights as a learner sends them, for the node's tests (remote/node_*test.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "proto/remote.pb.h"
#include "remote/wire.h"

namespace pronghorn::remote::testing {

// n floats counting up from `start`.
inline std::vector<float> ramp(size_t n, float start = 0.5f) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

// `params` as the learner sends them: chunks of `chunk_bytes`, in order.
inline std::vector<v1::WeightsChunk> chunks_of(uint64_t version, const std::vector<float>& params,
                                               size_t chunk_bytes) {
  const size_t total = params.size() * sizeof(float);
  const uint32_t crc = crc32_of(params.data(), total);
  std::vector<v1::WeightsChunk> out;
  for (size_t offset = 0; offset < total; offset += chunk_bytes) {
    v1::WeightsChunk c;
    c.set_version(version);
    c.set_total_bytes(total);
    c.set_offset(offset);
    c.set_checksum(crc);
    c.set_data(reinterpret_cast<const char*>(params.data()) + offset,
               std::min(chunk_bytes, total - offset));
    out.push_back(c);
  }
  return out;
}

}  // namespace pronghorn::remote::testing

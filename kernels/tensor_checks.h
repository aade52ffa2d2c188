// Argument checks shared by the kernel dispatchers: each throws
// pronghorn::Error naming the argument, what it is and what was expected.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace pronghorn::kernels {

// `t` must be defined, of `dtype`, with exactly `shape`, on `device`; returns
// it contiguous (a copy only when it was not).
at::Tensor checked(const at::Tensor& t, const char* name, at::ScalarType dtype,
                   const std::vector<int64_t>& shape, const at::Device& device);

// For flags given as bool or uint8: returns them as contiguous float32 0/1,
// the form the kernels blend with.
at::Tensor checked_flags(const at::Tensor& t, const char* name, const std::vector<int64_t>& shape,
                         const at::Device& device);

// The stream kernels on `device` should use: LibTorch's current CUDA stream
// where this LibTorch has CUDA, else the default stream (nullptr).
void* cuda_stream_for(const at::Device& device);

// Throws unless `device` is the CPU or a CUDA device this build can run on.
void check_device_supported(const at::Device& device, const char* kernel);

}  // namespace pronghorn::kernels

#include "kernels/tensor_checks.h"

#include <fmt/format.h>

// Debian ships c10/cuda headers with its CPU-only LibTorch; only CUDA builds
// have the generated cuda_cmake_macros.h.
#if __has_include(<c10/cuda/impl/cuda_cmake_macros.h>)
#include <c10/cuda/CUDAStream.h>
#define PRONGHORN_TORCH_HAS_CUDA 1
#endif

#include "core/error.h"

namespace pronghorn::kernels {
namespace {

std::string shape_text(at::IntArrayRef shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

void check_common(const at::Tensor& t, const char* name, const std::vector<int64_t>& shape,
                  const at::Device& device) {
  PRONGHORN_CHECK(t.defined(), name, ": expected a tensor of shape ", shape_text(shape),
                  ", got none");
  PRONGHORN_CHECK(t.sizes() == at::IntArrayRef(shape), name, ": expected shape ", shape_text(shape),
                  ", got ", shape_text(t.sizes()));
  PRONGHORN_CHECK(t.device() == device, name, ": expected a tensor on ", device.str(), ", got ",
                  t.device().str());
}

}  // namespace

at::Tensor checked(const at::Tensor& t, const char* name, at::ScalarType dtype,
                   const std::vector<int64_t>& shape, const at::Device& device) {
  check_common(t, name, shape, device);
  PRONGHORN_CHECK(t.scalar_type() == dtype, name, ": expected dtype ", c10::toString(dtype),
                  ", got ", c10::toString(t.scalar_type()));
  return t.contiguous();
}

at::Tensor checked_flags(const at::Tensor& t, const char* name, const std::vector<int64_t>& shape,
                         const at::Device& device) {
  check_common(t, name, shape, device);
  PRONGHORN_CHECK(t.scalar_type() == at::kBool || t.scalar_type() == at::kByte, name,
                  ": expected dtype Bool or Byte, got ", c10::toString(t.scalar_type()));
  return t.to(at::kFloat).contiguous();
}

void* cuda_stream_for([[maybe_unused]] const at::Device& device) {
#ifdef PRONGHORN_TORCH_HAS_CUDA
  if (device.is_cuda()) return c10::cuda::getCurrentCUDAStream(device.index()).stream();
#endif
  return nullptr;
}

void check_device_supported(const at::Device& device, const char* kernel) {
  if (device.is_cpu()) return;
#ifdef PRONGHORN_WITH_CUDA
  if (device.is_cuda()) return;
#endif
  throw Error(fmt::format("{}: tensors on {} are not supported by this build (CPU{})", kernel,
                          device.str(),
#ifdef PRONGHORN_WITH_CUDA
                          " and CUDA"
#else
                          " only"
#endif
                          ));
}

}  // namespace pronghorn::kernels

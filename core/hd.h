// PRONGHORN_HD marks math shared by the CPU loops and the CUDA kernels:
// __host__ __device__ under nvcc, nothing under a C++ compiler.
#pragma once

#if defined(__CUDACC__)
#define PRONGHORN_HD __host__ __device__
#else
#define PRONGHORN_HD
#endif

// CPU loops compiled for several vector widths in one binary; the loader
// picks the widest this CPU has (GCC function multiversioning): AVX-512,
// AVX2 + FMA, or baseline x86-64.
#define PRONGHORN_VECTOR_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

// PRONGHORN_HD marks math shared by the CPU loops and the CUDA kernels:
// __host__ __device__ under nvcc, nothing under a C++ compiler.
#pragma once

#if defined(__CUDACC__)
#define PRONGHORN_HD __host__ __device__
#else
#define PRONGHORN_HD
#endif

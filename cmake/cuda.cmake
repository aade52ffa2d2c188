# CUDA is optional: where nvcc exists (PATH, CUDACXX, or /usr/local/cuda) the
# CUDA language is enabled and kernels/ compiles its .cu files for sm_80 and
# sm_90 and links NCCL. No GPU is needed to build; PRONGHORN_WITH_CUDA tells
# the code which half it has.
set(PRONGHORN_WITH_CUDA OFF)
if(PRONGHORN_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 knows no CUDA20 for nvcc; .cu files stay C++17
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} REQUIRED)
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} REQUIRED)
    set(PRONGHORN_WITH_CUDA ON)
    message(STATUS "pronghorn: CUDA kernels ON (${CMAKE_CUDA_COMPILER}, sm ${CMAKE_CUDA_ARCHITECTURES}), NCCL ${NCCL_LIBRARY}")
  else()
    message(STATUS "pronghorn: CUDA kernels OFF (no nvcc found)")
  endif()
else()
  message(STATUS "pronghorn: CUDA kernels OFF (PRONGHORN_CUDA=OFF)")
endif()

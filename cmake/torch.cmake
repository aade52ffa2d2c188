# LibTorch: Debian's 1.13 (CPU only, under /usr), or one a user brings with
# Torch_DIR / CMAKE_PREFIX_PATH: a PyTorch wheel's (2.x, CUDA; its
# <site-packages>/torch/share/cmake) or an unpacked libtorch archive. One
# LibTorch per build: the checks below keep a second one from leaking in.
#
# A CUDA LibTorch's config sets nvcc flags for its own architectures (eleven
# of them, and CMAKE_CUDA_ARCHITECTURES to OFF) in this folder's scope. Our
# .cu files include no LibTorch headers: they keep the flags and
# architectures of cmake/cuda.cmake.
set(cuda_flags "${CMAKE_CUDA_FLAGS}")
set(cuda_architectures "${CMAKE_CUDA_ARCHITECTURES}")
if(cuda_architectures AND NOT DEFINED TORCH_CUDA_ARCH_LIST)
  # Its spelling of ours ("8.0;9.0"), so that it does not probe for a GPU.
  list(TRANSFORM cuda_architectures REPLACE "^([0-9]+)([0-9])$" "\\1.\\2"
    OUTPUT_VARIABLE TORCH_CUDA_ARCH_LIST)
endif()
unset(CMAKE_CUDA_ARCHITECTURES)
# Protobuf first: a wheel's LibTorch has its own linked in and hidden, and its
# Caffe2Config.cmake would otherwise define protobuf::libprotobuf as an empty
# stand-in, which FindProtobuf then leaves be (gRPC's code would link none).
find_package(Protobuf REQUIRED)
find_package(Torch REQUIRED)
set(CMAKE_CUDA_FLAGS "${cuda_flags}")
if(cuda_architectures)
  set(CMAKE_CUDA_ARCHITECTURES "${cuda_architectures}")
endif()

# TorchConfig.cmake finds c10, c10_cuda, kineto and torch with
# find_library(... PATHS <its lib>), which searches the system's folders
# first: with Debian's libtorch-dev installed, a wheel's build would link
# Debian's libc10.so beside the wheel's libtorch. Take each from the LibTorch
# that was found instead.
get_filename_component(PRONGHORN_TORCH_PREFIX "${TORCH_INSTALL_PREFIX}" REALPATH)
foreach(var c10_LIBRARY C10_CUDA_LIBRARY kineto_LIBRARY TORCH_LIBRARY)
  if(NOT ${var})
    continue()
  endif()
  get_filename_component(found "${${var}}" REALPATH)
  string(FIND "${found}" "${PRONGHORN_TORCH_PREFIX}/" at)
  if(at EQUAL 0)
    continue()
  endif()
  get_filename_component(name "${${var}}" NAME)
  if(NOT EXISTS "${PRONGHORN_TORCH_PREFIX}/lib/${name}")
    message(FATAL_ERROR "LibTorch at ${PRONGHORN_TORCH_PREFIX} has no lib/${name}, and "
      "${${var}} belongs to another LibTorch; two LibTorch builds cannot share one build")
  endif()
  set(libraries "")
  foreach(library ${TORCH_LIBRARIES})
    if(library STREQUAL "${${var}}")
      set(library "${PRONGHORN_TORCH_PREFIX}/lib/${name}")
    endif()
    list(APPEND libraries "${library}")
  endforeach()
  set(TORCH_LIBRARIES "${libraries}")
  set(${var} "${PRONGHORN_TORCH_PREFIX}/lib/${name}" CACHE FILEPATH "" FORCE)
endforeach()

# Everything else of ours comes from Debian, built with the C++11 string ABI;
# older PyTorch wheels (before 2.7) use the pre-C++11 one and cannot link with it.
if(TORCH_CXX_FLAGS MATCHES "_GLIBCXX_USE_CXX11_ABI=0")
  message(FATAL_ERROR "LibTorch at ${PRONGHORN_TORCH_PREFIX} uses the pre-C++11 ABI "
    "(${TORCH_CXX_FLAGS}); Pronghorn's other libraries use the C++11 ABI: use a "
    "cxx11-abi LibTorch (PyTorch wheels from 2.7 on are)")
endif()

# PyTorch wheels ship the headers of libraries they compile in (fmt 12,
# Protobuf 3.13) in include/ beside their own; as the first include folder
# they would shadow the fmt and Protobuf we link. Where a LibTorch outside the
# system's include folder has such folders, a folder of links to the rest of
# its include/ replaces it.
set(torch_include "${PRONGHORN_TORCH_PREFIX}/include")
set(torch_own "${CMAKE_BINARY_DIR}/torch-include")
file(REMOVE_RECURSE "${torch_own}")
if(NOT torch_include IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES
   AND (EXISTS "${torch_include}/fmt" OR EXISTS "${torch_include}/google"))
  file(MAKE_DIRECTORY "${torch_own}")
  file(GLOB entries RELATIVE "${torch_include}" "${torch_include}/*")
  foreach(entry ${entries})
    if(NOT entry MATCHES "^(fmt|google)$")
      file(CREATE_LINK "${torch_include}/${entry}" "${torch_own}/${entry}" SYMBOLIC)
    endif()
  endforeach()
  set(TORCH_INCLUDE_DIRS "${torch_own}" "${torch_own}/torch/csrc/api/include")
  foreach(target torch torch_cpu torch_cuda c10 c10_cuda)
    if(NOT TARGET ${target})
      continue()
    endif()
    get_target_property(dirs ${target} INTERFACE_INCLUDE_DIRECTORIES)
    set(own_dirs "")
    foreach(dir ${dirs})
      get_filename_component(real "${dir}" REALPATH)
      string(REPLACE "${torch_include}" "${torch_own}" dir "${real}")
      list(APPEND own_dirs "${dir}")
    endforeach()
    set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${own_dirs}")
  endforeach()
endif()

# A LibTorch built elsewhere (PyTorch's wheels and archives are built with a
# newer GCC on an older system) carries copies of newer libstdc++ functions
# (std::filesystem, std::chrono's time zones) and exports them; ahead of
# libstdc++.so in the lookup order they would serve our calls too
# (std::filesystem::remove_all from libtorch.so crashes). libstdc++ first.
if(NOT torch_include IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
  list(PREPEND TORCH_LIBRARIES stdc++)
endif()

set(PRONGHORN_TORCH_CUDA OFF)
if(TARGET torch_cuda OR TARGET torch::cudart)
  set(PRONGHORN_TORCH_CUDA ON)
endif()
message(STATUS "pronghorn: LibTorch ${Torch_VERSION} at ${PRONGHORN_TORCH_PREFIX} "
  "(CUDA ${PRONGHORN_TORCH_CUDA})")

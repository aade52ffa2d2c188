# Helpers that give every target of ours the same include root, warnings and
# test wiring. Third-party headers come in as system headers, so -Werror
# applies to our code only.

# Warnings fail the build for developers and CI (`make test` turns this on),
# never for users: another compiler's new warning (GCC 12's -Wrestrict false
# positives) must not break their build.
option(PRONGHORN_WERROR "Treat warnings in our code as errors" OFF)
set(PRONGHORN_WARNINGS -Wall -Wextra -Wshadow -Wnon-virtual-dtor)
if(PRONGHORN_WERROR)
  list(APPEND PRONGHORN_WARNINGS -Werror)
endif()

# pronghorn_library(<name> SOURCES ... DEPS ...): the folder's static library.
function(pronghorn_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${PRONGHORN_WARNINGS}>)
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
endfunction()

# pronghorn_test(<name> SOURCES ... DEPS ...): a GoogleTest binary registered
# with ctest. Its main() (core/testing/test_main.cpp) also removes what a
# passing test left in the temporary directory.
function(pronghorn_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  if(NOT TARGET pronghorn_test_main)
    add_library(pronghorn_test_main STATIC ${PROJECT_SOURCE_DIR}/core/testing/test_main.cpp)
    target_link_libraries(pronghorn_test_main PUBLIC GTest::gtest)
    target_compile_options(pronghorn_test_main PRIVATE ${PRONGHORN_WARNINGS})
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest pronghorn_test_main)
  target_compile_options(${name} PRIVATE ${PRONGHORN_WARNINGS})
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300)
endfunction()

# LibTorch's headers dominate build time: learner/control_inbox.cpp, which
# includes <torch/torch.h>, took 34 s on one core, 13 s with the header
# precompiled (BENCHMARKS.md "Build"). Every library, test and binary with
# several LibTorch translation units reuses one PCH of it (the kernels
# library, with 3 and CUDA sources beside them, does not), compiled once per
# kind of target: GCC refuses a PCH compiled with another -fPIC/-fPIE
# setting, so static libraries (position-independent) share one and
# executables another. The owners are made at the top level, link LibTorch
# alone and carry no definitions or options of ours: a macro defined where the
# PCH was compiled but not where it is used would void it. -Winvalid-pch (an
# error under PRONGHORN_WERROR) says when a target's flags stop fitting.
function(pronghorn_torch_pch_owners)
  foreach(kind library program)
    set(owner pronghorn_torch_pch_${kind})
    add_library(${owner} STATIC ${PROJECT_SOURCE_DIR}/cmake/torch_pch.cpp)
    target_link_libraries(${owner} PUBLIC ${TORCH_LIBRARIES})
    target_compile_options(${owner} PRIVATE ${PRONGHORN_WARNINGS})
    target_precompile_headers(${owner} PRIVATE <torch/torch.h>)
  endforeach()
  set_target_properties(pronghorn_torch_pch_library PROPERTIES POSITION_INDEPENDENT_CODE ON)
  set_target_properties(pronghorn_torch_pch_program PROPERTIES POSITION_INDEPENDENT_CODE OFF)
endfunction()

# pronghorn_torch_pch(<target> [SKIP files...]): <target> reuses the PCH.
# Loading it costs about 5 s, so the target's files that include no LibTorch
# header, or only light ones (c10's Exception.h, ATen's Parallel.h), are
# listed after SKIP and compile without it; a listed file that is not among
# the target's sources stops the configure.
function(pronghorn_torch_pch target)
  cmake_parse_arguments(ARG "" "" "SKIP" ${ARGN})
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE")
    set(owner pronghorn_torch_pch_program)
  else()
    set(owner pronghorn_torch_pch_library)
  endif()
  target_precompile_headers(${target} REUSE_FROM ${owner})
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Winvalid-pch>)
  get_target_property(sources ${target} SOURCES)
  foreach(file ${ARG_SKIP})
    if(NOT file IN_LIST sources)
      message(FATAL_ERROR "pronghorn_torch_pch(${target} SKIP ...): ${file} is not one of its sources")
    endif()
  endforeach()
  if(ARG_SKIP)
    set_source_files_properties(${ARG_SKIP} TARGET_DIRECTORY ${target}
      PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
  endif()
endfunction()

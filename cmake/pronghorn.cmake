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

# LibTorch's headers dominate build time; targets with several LibTorch
# translation units share one precompiled header (a single PCH compiled once
# and reused by every target that asks).
function(pronghorn_torch_pch target)
  if(NOT TARGET pronghorn_torch_pch_owner)
    add_library(pronghorn_torch_pch_owner STATIC ${PROJECT_SOURCE_DIR}/cmake/torch_pch.cpp)
    target_link_libraries(pronghorn_torch_pch_owner PUBLIC ${TORCH_LIBRARIES} GTest::gtest)
    target_compile_options(pronghorn_torch_pch_owner PRIVATE ${PRONGHORN_WARNINGS})
    target_precompile_headers(pronghorn_torch_pch_owner PUBLIC
      <ATen/ATen.h> <torch/csrc/autograd/custom_function.h> <gtest/gtest.h>)
  endif()
  target_precompile_headers(${target} REUSE_FROM pronghorn_torch_pch_owner)
endfunction()

# Helpers that give every target of ours the same include root, warnings and
# test wiring. Third-party headers come in as system headers, so -Werror
# applies to our code only.

set(PRONGHORN_WARNINGS -Wall -Wextra -Wshadow -Wnon-virtual-dtor -Werror)

# pronghorn_library(<name> SOURCES ... DEPS ...): the folder's static library.
function(pronghorn_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${PRONGHORN_WARNINGS}>)
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
endfunction()

# pronghorn_test(<name> SOURCES ... DEPS ...): a GoogleTest binary registered with ctest.
function(pronghorn_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  target_compile_options(${name} PRIVATE ${PRONGHORN_WARNINGS})
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300)
endfunction()

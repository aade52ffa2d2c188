# ctest FastGemmAvx512DefinesOnlyItsOwnSymbols: the object compiled for
# AVX-512 (model/fast_gemm_avx512.cpp) may define, as global symbols, only its
# entry point and Eigen's templates (no other file includes Eigen). Any other
# global definition (an inline function of the standard library, say) could
# be the copy the linker keeps for the whole program, and its AVX-512
# instructions would then run on a CPU without them.
#   cmake -DOBJECTS=<object files> -P check_avx512_symbols.cmake
foreach(object IN LISTS OBJECTS)
  execute_process(COMMAND nm --defined-only ${object} OUTPUT_VARIABLE symbols
                  RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "nm failed on ${object}")
  endif()
  string(REPLACE "\n" ";" lines "${symbols}")
  set(count 0)
  foreach(line IN LISTS lines)
    # "<address> <type> <name>": upper-case types are global (W, V: weak).
    if(line MATCHES "^[0-9a-f]+ ([A-Z]) (.*)$")
      set(name "${CMAKE_MATCH_2}")
      math(EXPR count "${count} + 1")
      # Mangled: _ZN5Eigen… / _ZNK5Eigen… are in namespace Eigen.
      if(NOT name MATCHES "^_ZN5Eigen" AND NOT name MATCHES "^_ZNK5Eigen"
         AND NOT name MATCHES "^_ZN9pronghorn8fast_mlp11gemm_avx512E"
         AND NOT name STREQUAL "DW.ref.__gxx_personality_v0")
        message(FATAL_ERROR "${object} defines ${name}: a global symbol other files may share")
      endif()
    endif()
  endforeach()
  if(count EQUAL 0)
    message(FATAL_ERROR "${object}: no global symbols read (is nm's output as expected?)")
  endif()
  message(STATUS "${object}: ${count} global symbols, all Eigen's or gemm_avx512")
endforeach()

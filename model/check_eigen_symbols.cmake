# ctest FastGemm<Isa>DefinesOnlyItsOwnSymbols: an object compiled from
# model/fast_gemm_eigen.cpp for one instruction set may define, as global
# symbols, only its entry point and Eigen's templates in its own renamed
# namespace. Any other global definition (an inline function of the standard
# library, or an Eigen template under the name the other copy also defines)
# could be the copy the linker keeps for the whole program, and its
# instructions would then run on a CPU without them. That no other file
# includes Eigen is checked here too, over the sources.
#   cmake -DOBJECTS=<object files> -DNAMESPACE=<EigenAvx2> -DENTRY=<gemm_avx2>
#         -DSOURCE_DIR=<repository> -P check_eigen_symbols.cmake
file(GLOB_RECURSE sources RELATIVE ${SOURCE_DIR} ${SOURCE_DIR}/*.h ${SOURCE_DIR}/*.cpp
     ${SOURCE_DIR}/*.cu)
foreach(source IN LISTS sources)
  if(source MATCHES "^build" OR source STREQUAL "model/fast_gemm_eigen.cpp")
    continue()
  endif()
  file(STRINGS ${SOURCE_DIR}/${source} eigen REGEX "#include *[<\"]Eigen/")
  if(eigen)
    message(FATAL_ERROR "${source} includes Eigen: only model/fast_gemm_eigen.cpp may")
  endif()
endforeach()
# Mangled names: a namespace is <length><name>.
string(LENGTH ${NAMESPACE} namespace_length)
string(LENGTH ${ENTRY} entry_length)
foreach(object IN LISTS OBJECTS)
  execute_process(COMMAND nm --defined-only ${object} OUTPUT_VARIABLE symbols
                  RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "nm failed on ${object}")
  endif()
  string(REPLACE "\n" ";" lines "${symbols}")
  set(count 0)
  foreach(line IN LISTS lines)
    # "<address> <type> <name>": upper-case types are global (W, V: weak),
    # u a unique global, i an indirect function.
    if(line MATCHES "^[0-9a-f]+ ([A-Zui]) (.*)$")
      set(name "${CMAKE_MATCH_2}")
      math(EXPR count "${count} + 1")
      # _ZN…, _ZNK… in the namespace; _ZZN… a static inside one of its
      # functions and _ZGVZN… that static's guard.
      if(NOT name MATCHES "^_Z(GV)?Z?NK?${namespace_length}${NAMESPACE}"
         AND NOT name MATCHES "^_ZN9pronghorn8fast_mlp${entry_length}${ENTRY}E"
         AND NOT name STREQUAL "DW.ref.__gxx_personality_v0")
        message(FATAL_ERROR "${object} defines ${name}: a global symbol other files may share")
      endif()
    endif()
  endforeach()
  if(count EQUAL 0)
    message(FATAL_ERROR "${object}: no global symbols read (is nm's output as expected?)")
  endif()
  message(STATUS "${object}: ${count} global symbols, all ${NAMESPACE}'s or ${ENTRY}")
endforeach()

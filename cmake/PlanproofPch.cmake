# One precompiled header (cmake/Precompiled.h) for every C++ target of the project.
# It is built once, in the object library planproof-pch, and every other target reuses
# it (REUSE_FROM), which needs the same compiler and flags everywhere; the targets that
# differ are left out: the table generator (LLVM's static Support library), the CUDA
# module (nvcc), position-independent code (the device library that the CUDA module
# links), and the libFuzzer harnesses (clang with -fsanitize=fuzzer). GCC would parse
# the headers again for them, and -Winvalid-pch says so should one slip through.
option(PLANPROOF_PCH "Precompile the toolchain's, MLIR's and the dialects' headers" ON)

function(planproof_collect_targets dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub ${subdirs})
    planproof_collect_targets(${sub} more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

function(planproof_enable_pch)
  if(NOT PLANPROOF_PCH)
    return()
  endif()
  add_library(planproof-pch OBJECT ${PROJECT_SOURCE_DIR}/cmake/Precompiled.cpp)
  target_precompile_headers(planproof-pch PRIVATE ${PROJECT_SOURCE_DIR}/cmake/Precompiled.h)
  target_link_libraries(planproof-pch PRIVATE MLIR LLVM nlohmann_json::nlohmann_json)
  add_dependencies(planproof-pch PlanproofRefIncGen PlanproofRefInterfacesIncGen
                   PlanproofDistIncGen)

  planproof_collect_targets(${PROJECT_SOURCE_DIR} targets)
  foreach(target ${targets})
    get_target_property(type ${target} TYPE)
    get_target_property(pic ${target} POSITION_INDEPENDENT_CODE)
    if(pic OR NOT type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|EXECUTABLE|OBJECT_LIBRARY)$"
       OR target STREQUAL "planproof-pch" OR target STREQUAL "planproof-tblgen"
       OR (PLANPROOF_LIBFUZZER AND target MATCHES "^planproof-fuzz-"))
      continue()
    endif()
    get_target_property(sources ${target} SOURCES)
    set(cxx OFF)
    foreach(source ${sources})
      if(source MATCHES "\\.cpp$")
        set(cxx ON)
      endif()
    endforeach()
    if(cxx)
      target_precompile_headers(${target} REUSE_FROM planproof-pch)
      target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Winvalid-pch>)
    endif()
  endforeach()
endfunction()

# harvest_library(<name> SOURCES <files...> [DEPS <targets...>] [PRIVATE_DEPS <targets...>])
#
# Defines the static library `harvest_<name>` with everything a harvest module
# target carries: the `harvest::<name>` alias (the only name other targets and
# the tests link), `src/` as its public include root (so includes read
# <harvest/engine/engine.hpp> in the tree and once installed), C++23 and the project's
# warning flags. DEPS are public (they appear in this module's headers),
# PRIVATE_DEPS are implementation details. The export name is `<name>`, so an
# installed package offers the same `harvest::<name>`.
function(harvest_library name)
  cmake_parse_arguments(L "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  if(NOT L_SOURCES)
    message(FATAL_ERROR "harvest_library(${name}) needs SOURCES")
  endif()
  set(target harvest_${name})
  add_library(${target} ${L_SOURCES})
  add_library(harvest::${name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name} POSITION_INDEPENDENT_CODE ON)
  target_compile_features(${target} PUBLIC cxx_std_23)
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/src>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_options(${target} PRIVATE ${HARVEST_WARNING_FLAGS})
  if(L_DEPS)
    target_link_libraries(${target} PUBLIC ${L_DEPS})
  endif()
  if(L_PRIVATE_DEPS)
    target_link_libraries(${target} PRIVATE ${L_PRIVATE_DEPS})
  endif()
  set_property(GLOBAL APPEND PROPERTY HARVEST_LIBRARIES ${target})
endfunction()

# harvest_executable(<name> SOURCES <files...> [DEPS <targets...>])
# A program of the project (CLI, example, benchmark, test helper): the
# project's warning flags and C++23, linked against harvest:: aliases.
function(harvest_executable name)
  cmake_parse_arguments(E "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${E_SOURCES})
  if("thread" IN_LIST HARVEST_SANITIZE)
    # glibc's C11 threads (librdkafka's) bypass ThreadSanitizer's
    # interceptors; this file routes them through pthreads (see its comment).
    target_sources(${name} PRIVATE ${PROJECT_SOURCE_DIR}/cmake/tsan_c11_threads.cpp)
  endif()
  target_compile_features(${name} PRIVATE cxx_std_23)
  target_compile_options(${name} PRIVATE ${HARVEST_WARNING_FLAGS})
  if(E_DEPS)
    target_link_libraries(${name} PRIVATE ${E_DEPS})
  endif()
endfunction()

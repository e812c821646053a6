# Installation: the module libraries, their headers, the `harvest` CLI, a
# CMake package (find_package(harvest CONFIG) → harvest::harvest and one
# harvest::<module> per module, dependencies found transitively) and a
# pkg-config file, laid out the way fmt and spdlog install:
#   <prefix>/include/harvest/<module>/*.hpp
#   <prefix>/lib/libharvest_<module>.a
#   <prefix>/lib/cmake/harvest/harvest{Config,ConfigVersion,Targets}.cmake
#   <prefix>/lib/pkgconfig/harvest.pc
#   <prefix>/bin/harvest
include(CMakePackageConfigHelpers)

get_property(harvest_libraries GLOBAL PROPERTY HARVEST_LIBRARIES)

# harvest::harvest: every module this build has.
add_library(harvest_all INTERFACE)
set_target_properties(harvest_all PROPERTIES EXPORT_NAME harvest)
target_link_libraries(harvest_all INTERFACE ${harvest_libraries})
add_library(harvest::harvest ALIAS harvest_all)

install(TARGETS ${harvest_libraries} harvest_all EXPORT harvestTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS harvest RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# Headers of the modules this build has (no kafka/ without harvest::kafka).
set(harvest_header_excludes "")
foreach(m kafka sqs api)
  if(NOT TARGET harvest::${m})
    list(APPEND harvest_header_excludes PATTERN "${m}" EXCLUDE)
  endif()
endforeach()
# Everything is included as <harvest/...>: the include directory is <prefix>/include.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/src/harvest ${PROJECT_BINARY_DIR}/generated/harvest
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.hpp" ${harvest_header_excludes})
install(EXPORT harvestTargets NAMESPACE harvest::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/harvest)

# What harvestConfig.cmake must find again for the modules this build has.
set(HARVEST_PACKAGE_API ${HARVEST_API})
set(HARVEST_PACKAGE_KAFKA OFF)
set(HARVEST_PACKAGE_SQS OFF)
if(TARGET harvest::kafka)
  set(HARVEST_PACKAGE_KAFKA ON)
endif()
if(TARGET harvest::sqs)
  set(HARVEST_PACKAGE_SQS ON)
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/harvestConfig.cmake.in
  ${PROJECT_BINARY_DIR}/harvestConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/harvest)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/harvestConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/harvestConfig.cmake
  ${PROJECT_BINARY_DIR}/harvestConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/harvest)

# harvest.pc: libraries in link order (dependents first), then what they need.
set(HARVEST_PC_LIBS "")
set(HARVEST_PC_REQUIRES "libpq nlohmann_json spdlog fmt libcrypto")
set(HARVEST_PC_CFLAGS "-DHARVEST_WITH_CONNECTORS=1")
foreach(m cli plugin kafka_testing kafka sqs api metrics_prometheus connector connector_dlq engine
          store metrics common)
  if(TARGET harvest_${m})
    string(APPEND HARVEST_PC_LIBS " -lharvest_${m}")
  endif()
endforeach()
if(TARGET harvest::kafka)
  string(APPEND HARVEST_PC_REQUIRES " rdkafka++")
endif()
if(TARGET harvest::sqs)
  string(APPEND HARVEST_PC_REQUIRES " libcurl")
endif()
if(TARGET harvest::api)
  string(APPEND HARVEST_PC_REQUIRES " prometheus-cpp-core")
  string(APPEND HARVEST_PC_CFLAGS " -DHARVEST_WITH_API=1")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/harvest.pc.in ${PROJECT_BINARY_DIR}/harvest.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/harvest.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

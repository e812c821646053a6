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
# The public headers, and only those (docs/compatibility.md): what a project
# includes, and what they include in turn. Everything else under src/harvest
# (the execution store and its SQL, admission, the history writer, the
# connector runtime's parts, the librdkafka glue, the SQS transport and SigV4)
# is internal and stays out of the install. scripts/check_headers.sh compiles
# each installed header alone, so a public header that reached an internal
# one would fail the install check.
set(harvest_public_headers_common
  common/clock.hpp common/error.hpp common/ids.hpp common/json.hpp common/trace_context.hpp)
set(harvest_public_headers_metrics metrics/prometheus.hpp metrics/recorder.hpp)
set(harvest_public_headers_store store/migrations.hpp)
set(harvest_public_headers_engine
  engine/engine.hpp engine/types.hpp engine/worker.hpp engine/workflow.hpp)
set(harvest_public_headers_connector
  connector/binding.hpp connector/coordinates.hpp connector/dead_letter.hpp
  connector/event_source.hpp connector/message_ctx.hpp connector/mock_source.hpp
  connector/runtime.hpp)
set(harvest_public_headers_kafka kafka/kafka_source.hpp kafka/kafka_source_config.hpp)
set(harvest_public_headers_sqs sqs/credentials.hpp sqs/sqs_client.hpp sqs/sqs_source.hpp)
set(harvest_public_headers_api api/http_server.hpp)
set(harvest_public_headers_plugin plugin/plugin.hpp)
# Everything is included as <harvest/...>: the include directory is <prefix>/include.
foreach(m common metrics store engine connector kafka sqs api plugin)
  if(TARGET harvest::${m})  # no kafka/ headers without harvest::kafka
    foreach(h ${harvest_public_headers_${m}})
      get_filename_component(dir ${h} DIRECTORY)
      install(FILES ${PROJECT_SOURCE_DIR}/src/harvest/${h}
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/harvest/${dir})
    endforeach()
  endif()
endforeach()
install(FILES ${PROJECT_BINARY_DIR}/generated/harvest/version.hpp
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/harvest)
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
set(HARVEST_PC_REQUIRES "libpq nlohmann_json spdlog fmt libcrypto re2")
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

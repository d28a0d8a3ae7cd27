include(GNUInstallDirs)

# caudal_add_library(name SOURCES ... DEPS ...): a layer library with an ALIAS caudal::name.
# Installed with the package when its layer is listed in CAUDAL_LAYERS (see CaudalInstall.cmake):
# its public headers are include/caudal/, in the source tree and in the installed one.
function(caudal_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(caudal_${name} STATIC ${ARG_SOURCES})
  add_library(caudal::${name} ALIAS caudal_${name})
  target_include_directories(caudal_${name}
    PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(caudal_${name} PUBLIC ${ARG_DEPS})
  # caudal_warnings' flags, without a link dependency the installed package would have to carry.
  target_compile_options(caudal_${name}
    PRIVATE $<TARGET_PROPERTY:caudal_warnings,INTERFACE_COMPILE_OPTIONS>)
endfunction()

# caudal_add_test(name SOURCES ... DEPS ... [LABELS ...]): a GoogleTest binary registered with CTest.
function(caudal_add_test name)
  if(NOT CAUDAL_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests)
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main
                                        caudal_warnings)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "${ARG_LABELS}")
endfunction()

# caudal_add_library(name SOURCES ... DEPS ...): a layer library with an ALIAS caudal::name.
function(caudal_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(caudal_${name} STATIC ${ARG_SOURCES})
  add_library(caudal::${name} ALIAS caudal_${name})
  target_include_directories(caudal_${name} PUBLIC ${PROJECT_SOURCE_DIR}/include
                                            PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(caudal_${name} PUBLIC ${ARG_DEPS} PRIVATE caudal_warnings)
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

include(GNUInstallDirs)

# Unity (jumbo) builds: a target's sources are compiled in batches of CAUDAL_UNITY_BATCH_SIZE,
# each batch one translation unit that #includes them, so the heavy headers most files share
# (Boost.Asio, Beast and JSON, gRPC, CLI11, GoogleTest) are parsed and instantiated once per batch
# rather than once per file: about half the CPU time of a full build (docs/testing.md). The
# libraries and test binaries made with the functions below have it, and the few other targets
# of several files that call caudal_unity_build. Generated code stays out of the batches (protoc's
# output is a library without them; the embedded scripts and documents are left out here), and so
# does a file with compile options of its own (CMake leaves those out by itself).
#
# In one batch the files share one anonymous namespace per enclosing namespace, so two file-local
# helpers of the same name in the same namespace collide (a compile error, or an overload set
# where there were two functions): give each a name of its own. A file that cannot be changed
# stays out with the source property SKIP_UNITY_BUILD_INCLUSION.
#
# -DCAUDAL_UNITY_BUILD=OFF compiles file by file, for an incremental build that recompiles only
# the file changed, or to check that every file includes what it uses. compile_commands.json
# names each source file either way (CaudalCompileCommands.cmake).
function(caudal_unity_build target)
  if(NOT CAUDAL_UNITY_BUILD)
    return()
  endif()
  get_target_property(sources ${target} SOURCES)
  set(batched 0)
  foreach(source IN LISTS sources)
    get_source_file_property(generated ${source} GENERATED)
    if(generated)
      set_source_files_properties(${source} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
    else()
      math(EXPR batched "${batched} + 1")
    endif()
  endforeach()
  if(batched GREATER 1)  # a lone file gains nothing from a batch of one
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON
                                               UNITY_BUILD_BATCH_SIZE ${CAUDAL_UNITY_BATCH_SIZE})
    # GCC warns of a class with a member of a file-local type (its anonymous namespace) unless the
    # class is in the file compiled, which in a batch a .cc file no longer is; such a class is as
    # file-local as ever.
    target_compile_options(${target} PRIVATE $<$<CXX_COMPILER_ID:GNU>:-Wno-subobject-linkage>)
  endif()
endfunction()

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
  caudal_unity_build(caudal_${name})
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
  caudal_unity_build(${name})
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "${ARG_LABELS}")
endfunction()

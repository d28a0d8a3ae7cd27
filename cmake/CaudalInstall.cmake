# caudal_install(LAYERS <dir>... EXECUTABLES <target>...): `cmake --install` rules and the CMake
# package, so that a C++ program can do find_package(caudal) and link caudal::store,
# caudal::engine, ...
#
# Installed: the public headers (include/caudal/), the library of every layer, caudal_<name> for
# a layer src/<name> (none for a layer without one), with every caudal library they link
# (caudal_envoy_proto for the envoy layer) and the headers generated into the build tree for
# them; the executables; and lib/cmake/caudal/ (caudalConfig.cmake, its version file, and
# caudalTargets.cmake naming each library caudal::<name>). Driven by the layer list, so a new or
# renamed layer needs no edit here.
#
# Components: `runtime` is the executables, `dev` everything a C++ program builds against; the
# .deb (cmake/CaudalPackage.cmake) holds `runtime` and its own `service` (unit, config, docs).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(CAUDAL_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/caudal)

# The caudal libraries `target` links (directly or not), aliases resolved, in `out`.
function(caudal_linked_libraries target out)
  set(found)
  set(queue ${target})
  while(queue)
    list(POP_FRONT queue t)
    get_target_property(deps ${t} INTERFACE_LINK_LIBRARIES)
    if(NOT deps)
      continue()
    endif()
    foreach(dep IN LISTS deps)
      # A private dependency of a static library is exported as $<LINK_ONLY:dep>.
      string(REGEX REPLACE "^\\$<LINK_ONLY:([^$<>]+)>$" "\\1" dep "${dep}")
      if(NOT TARGET "${dep}")
        continue()
      endif()
      get_target_property(aliased ${dep} ALIASED_TARGET)
      if(aliased)
        set(dep ${aliased})
      endif()
      get_target_property(imported ${dep} IMPORTED)
      get_target_property(type ${dep} TYPE)
      if(dep MATCHES "^caudal_" AND NOT imported AND type STREQUAL "STATIC_LIBRARY"
         AND NOT dep IN_LIST found)
        list(APPEND found ${dep})
        list(APPEND queue ${dep})
      endif()
    endforeach()
  endwhile()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

# Include directories a library exports from the build tree (generated headers, e.g. protoc's):
# their headers are installed under include/caudal/<export name>/, which the installed target
# uses instead.
function(caudal_install_generated_headers target export_name)
  set(installed_dir ${CMAKE_INSTALL_INCLUDEDIR}/caudal/${export_name})
  foreach(property INTERFACE_INCLUDE_DIRECTORIES INTERFACE_SYSTEM_INCLUDE_DIRECTORIES)
    get_target_property(dirs ${target} ${property})
    if(NOT dirs)
      continue()
    endif()
    set(rewritten)
    set(changed FALSE)
    foreach(dir IN LISTS dirs)
      cmake_path(IS_PREFIX PROJECT_BINARY_DIR "${dir}" NORMALIZE in_build_tree)
      if(dir MATCHES "^\\$<" OR NOT in_build_tree)
        list(APPEND rewritten "${dir}")
        continue()
      endif()
      list(APPEND rewritten "$<BUILD_INTERFACE:${dir}>")
      set(changed TRUE)
      # A consumer sees an imported target's include directories as system ones anyway.
      if(property STREQUAL "INTERFACE_INCLUDE_DIRECTORIES")
        list(APPEND rewritten "$<INSTALL_INTERFACE:${installed_dir}>")
        install(DIRECTORY ${dir}/ DESTINATION ${installed_dir} COMPONENT dev
                FILES_MATCHING PATTERN "*.h")
      endif()
    endforeach()
    if(changed)
      list(REMOVE_DUPLICATES rewritten)
      set_property(TARGET ${target} PROPERTY ${property} "${rewritten}")
    endif()
  endforeach()
endfunction()

function(caudal_install)
  cmake_parse_arguments(ARG "" "" "LAYERS;EXECUTABLES" ${ARGN})
  set(libraries)
  foreach(layer IN LISTS ARG_LAYERS)
    get_filename_component(name ${layer} NAME)
    if(TARGET caudal_${name})
      caudal_linked_libraries(caudal_${name} linked)
      list(APPEND libraries caudal_${name} ${linked})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES libraries)

  foreach(library IN LISTS libraries)
    string(REGEX REPLACE "^caudal_" "" export_name ${library})
    set_target_properties(${library} PROPERTIES EXPORT_NAME ${export_name})
    caudal_install_generated_headers(${library} ${export_name})
  endforeach()
  install(TARGETS ${libraries} EXPORT caudalTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/caudal DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
          COMPONENT dev)
  if(ARG_EXECUTABLES)
    install(TARGETS ${ARG_EXECUTABLES} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
            COMPONENT runtime)
  endif()

  install(EXPORT caudalTargets NAMESPACE caudal:: DESTINATION ${CAUDAL_INSTALL_CMAKEDIR}
          COMPONENT dev)
  configure_package_config_file(
    ${PROJECT_SOURCE_DIR}/cmake/caudalConfig.cmake.in
    ${PROJECT_BINARY_DIR}/caudalConfig.cmake
    INSTALL_DESTINATION ${CAUDAL_INSTALL_CMAKEDIR})
  # 0.x: a minor version may break the API, so only the same minor version is compatible.
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/caudalConfigVersion.cmake
                                   COMPATIBILITY SameMinorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/caudalConfig.cmake
                ${PROJECT_BINARY_DIR}/caudalConfigVersion.cmake
          DESTINATION ${CAUDAL_INSTALL_CMAKEDIR} COMPONENT dev)
  # What the tests check the installed package against (tests/install/).
  set(CAUDAL_INSTALLED_LIBRARIES ${libraries} PARENT_SCOPE)
endfunction()

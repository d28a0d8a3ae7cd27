# `make package` (CPack's DEB generator): caudal_<version>-<release>_<arch>.deb, the service as
# Debian installs one.
#
#   /usr/bin/caudal                       the `runtime` component (cmake/CaudalInstall.cmake)
#   /usr/lib/caudal/caudal.so             the caudal Redis module, for servers that load it
#   /lib/systemd/system/caudal.service    hardened unit, started by postinst where systemd runs
#   /etc/caudal/caudal.yaml               conffile: loopback, memory store, one example policy
#   /etc/default/caudal                   conffile, mode 0600: environment overrides, secrets
#   /usr/share/doc/caudal/                copyright, changelog, README and docs/
#   /usr/share/man/man1/caudal.1.gz       the manual page, which points to docs/
#
# The unit, the config and the docs are the `service` component, installed only by the package:
# they go to absolute paths (/etc, /lib), which a plain `cmake --install --prefix DIR` must not
# write to, so they are EXCLUDE_FROM_ALL. The `dev` component (headers, static libraries, the
# CMake package) is not packaged. Runtime dependencies come from dpkg-shlibdeps (dpkg-dev), plus
# procps for the unit's /bin/kill. tests/package builds the package from the build tree and
# installs it into a throwaway root.
set(CAUDAL_PACKAGE_MAINTAINER "caudal maintainers <maintainers@caudal.invalid>"
    CACHE STRING "The Maintainer field of the .deb")
set(CAUDAL_PACKAGE_RELEASE 1 CACHE STRING "The Debian revision of the .deb's version")

set(packaging ${PROJECT_SOURCE_DIR}/packaging)
set(docdir ${CMAKE_INSTALL_DATAROOTDIR}/doc/caudal)

# The caudal Redis module (src/redis/module/): a plugin Redis or Valkey loads (loadmodule), which
# Redis 7 refuses without execute permission: mode 0755, where CMake installs a shared object
# 0644 on Debian (CMAKE_INSTALL_SO_NO_EXE).
if(TARGET caudal_redis_module)
  install(TARGETS caudal_redis_module LIBRARY DESTINATION lib/caudal COMPONENT runtime
          PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ
                      WORLD_EXECUTE)
endif()
install(FILES ${packaging}/caudal.service DESTINATION /lib/systemd/system
        COMPONENT service EXCLUDE_FROM_ALL)
install(FILES ${packaging}/caudal.yaml DESTINATION /etc/caudal
        COMPONENT service EXCLUDE_FROM_ALL)
install(FILES ${packaging}/default DESTINATION /etc/default RENAME caudal
        PERMISSIONS OWNER_READ OWNER_WRITE COMPONENT service EXCLUDE_FROM_ALL)
install(FILES ${packaging}/debian/copyright ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${docdir}
        COMPONENT service EXCLUDE_FROM_ALL)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${docdir}/docs
        COMPONENT service EXCLUDE_FROM_ALL FILES_MATCHING PATTERN "*.md")

# Copies `source` into the build tree as `name` (configure_file, so an edit reconfigures) and
# compresses it as Debian wants documentation and manual pages: gzip -9n, no name or time inside.
function(caudal_gzip_for_package source name mode out)
  set(copy ${PROJECT_BINARY_DIR}/packaging/${name})
  configure_file(${source} ${copy} ${mode})
  execute_process(COMMAND gzip -9nkf ${copy} RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "gzip ${copy} failed: ${result}")
  endif()
  set(${out} ${copy}.gz PARENT_SCOPE)
endfunction()

# The changelog's date is the configure time's, or SOURCE_DATE_EPOCH's when that is set.
string(TIMESTAMP changelog_date "%a, %d %b %Y %H:%M:%S +0000" UTC)
set(CAUDAL_PACKAGE_VERSION ${PROJECT_VERSION}-${CAUDAL_PACKAGE_RELEASE})
caudal_gzip_for_package(${packaging}/debian/changelog.in changelog.Debian @ONLY changelog)
install(FILES ${changelog} DESTINATION ${docdir} COMPONENT service EXCLUDE_FROM_ALL)
caudal_gzip_for_package(${packaging}/caudal.1 caudal.1 COPYONLY manpage)
install(FILES ${manpage} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
        COMPONENT service EXCLUDE_FROM_ALL)
install(FILES ${packaging}/debian/lintian-overrides
        DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides
        RENAME caudal COMPONENT service EXCLUDE_FROM_ALL)

# Debian's hardening for a network daemon: every symbol bound at start, so the GOT can be read-only
# (full RELRO; PIE and RELRO are the toolchain's default already). Lintian checks it.
if(TARGET caudal)
  target_link_options(caudal PRIVATE LINKER:-z,now)
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME caudal)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT ${CAUDAL_PACKAGE_MAINTAINER})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "distributed rate limiter for HTTP APIs and Envoy")
set(CPACK_PACKAGE_DESCRIPTION
    "caudal decides whether a request fits a rate-limit policy (per API key, tenant,\n"
    "account or IP) over HTTP, for nginx auth_request and Traefik ForwardAuth, and\n"
    "for Envoy and Istio over Envoy's rate limit service API (gRPC).\n"
    "\n"
    "It offers five exact algorithms (token bucket, GCRA, fixed window, sliding\n"
    "window log and counter), a memory store for one instance and Redis (single,\n"
    "Cluster, Sentinel) for limits shared by many, with one atomic decision per\n"
    "request and a chosen answer for when the store fails.")
string(JOIN "" CPACK_PACKAGE_DESCRIPTION ${CPACK_PACKAGE_DESCRIPTION})
set(CPACK_STRIP_FILES ON)

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime service)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)

set(CPACK_DEBIAN_PACKAGE_NAME caudal)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE ${CAUDAL_PACKAGE_RELEASE})
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# tzdata: calendar windows read their time zones from the system database (date/tz.h).
set(CPACK_DEBIAN_PACKAGE_DEPENDS "procps, tzdata")
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${packaging}/debian/conffiles ${packaging}/debian/postinst ${packaging}/debian/prerm
    ${packaging}/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

include(CPack)

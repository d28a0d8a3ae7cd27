# -DCAUDAL_SANITIZE=address,undefined builds everything (tests included) with those sanitizers.
#
# UBSan's vptr check is left out. It probes memory with pipe(), so in a process out of file
# descriptors (which the suite creates on purpose, to test accept() failing with EMFILE) it
# reports valid objects as invalid and aborts. Its runtime reads suppressions only at its first
# report, when no descriptor is left to open the file, so the check cannot be turned off for that
# one server. AddressSanitizer still catches a call through a freed object.
#
# The sanitized build is optimised at -O1 with line tables only (-g1), whatever the build type:
# enough for the sanitizers' reports (file and line of every frame), and half the compile time of
# -O2 -g, which CI's budget needs (docs/testing.md).
if(CAUDAL_SANITIZE)
  add_compile_options(-fsanitize=${CAUDAL_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all
                      -O1 -g1)
  add_link_options(-fsanitize=${CAUDAL_SANITIZE})
  if(CAUDAL_SANITIZE MATCHES "undefined")
    add_compile_options(-fno-sanitize=vptr)
    add_link_options(-fno-sanitize=vptr)
  endif()
endif()

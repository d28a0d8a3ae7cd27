# cmake -DINPUT=<file> -DOUTPUT=<file.cc> -DHEADER=<header> -DNAMESPACE=<ns> -DFUNCTION=<name>
#       -P CaudalEmbed.cmake
# Writes OUTPUT: a C++ source whose FUNCTION() returns INPUT's bytes as a std::string_view, so a
# file kept in the repository (docs/openapi.json) is built into the binary unchanged. An array of
# bytes rather than a string literal: ISO C++ promises literals of 65,536 characters only, and
# -Wpedantic says so.
foreach(var INPUT OUTPUT HEADER NAMESPACE FUNCTION)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "CaudalEmbed.cmake: -D${var}= is required")
  endif()
endforeach()
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_length)
if(hex_length EQUAL 0)
  message(FATAL_ERROR "CaudalEmbed.cmake: ${INPUT} is empty")
endif()
# 16 bytes per line (CMake's regular expressions have no {n}).
string(REPEAT "[0-9a-f][0-9a-f]" 16 line)
string(REGEX REPLACE "(${line})" "\\1\n" hex "${hex}")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REPLACE "\n" "\n    " bytes "${bytes}")
get_filename_component(name "${INPUT}" NAME)
file(WRITE "${OUTPUT}.tmp" "// Generated from ${name} by cmake/CaudalEmbed.cmake at build time: edit ${name}.
#include \"${HEADER}\"

namespace ${NAMESPACE} {
namespace {

constexpr unsigned char kBytes[] = {
    ${bytes}
};

}  // namespace

std::string_view ${FUNCTION}() {
  return {reinterpret_cast<const char*>(kBytes), sizeof kBytes};
}

}  // namespace ${NAMESPACE}
")
# Only a changed file is rewritten, so an unchanged document recompiles nothing.
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")

# cmake -DFILE=<build>/compile_commands.json -P CaudalCompileCommands.cmake
#
# In a unity build (CaudalTargets.cmake) CMake's compile_commands.json names the generated batch
# files (CMakeFiles/<target>.dir/Unity/unity_<n>_cxx.cxx), which editors and clang tools never open.
# This rewrites each such entry as one entry per source file the batch includes, with the batch's
# command, so that every source file has its own entry as in a build without batches. A file
# without batch entries is left as it is, so running it again changes nothing.
#
# Reads the file as CMake writes it: one JSON object per entry, none nested.
if(NOT EXISTS "${FILE}")
  return()
endif()
file(READ "${FILE}" json)
set(unity_regex "/Unity/unity_[0-9]+_c(xx)?\\.c(xx)?$")
if(NOT json MATCHES "\"file\": \"[^\"]*/Unity/unity_[0-9]+_c")
  return()
endif()
# CMake lists are ;-separated, and a bracket hides the separators after it: keep a command's
# semicolons and brackets out of the way while the entries are a list.
string(REPLACE ";" "<caudal-semicolon>" json "${json}")
string(REPLACE "[" "<caudal-bracket-open>" json "${json}")
string(REPLACE "]" "<caudal-bracket-close>" json "${json}")
string(REGEX MATCHALL "{[^{}]*}" entries "${json}")
string(REGEX MATCHALL "\"file\": " files "${json}")
list(LENGTH entries n_entries)
list(LENGTH files n_files)
if(NOT n_entries EQUAL n_files)
  message(WARNING "${FILE}: not as CMake writes it (a brace in a command?); left as it is")
  return()
endif()
set(out "")
foreach(entry IN LISTS entries)
  string(JSON path GET "${entry}" file)
  if(NOT path MATCHES "${unity_regex}")
    list(APPEND out "${entry}")
    continue()
  endif()
  file(STRINGS "${path}" includes REGEX "^#include \"")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^#include \"(.*)\"$" "\\1" source "${line}")
    string(REPLACE "${path}" "${source}" one "${entry}")
    list(APPEND out "${one}")
  endforeach()
endforeach()
list(JOIN out ",\n" json)
string(REPLACE "<caudal-semicolon>" ";" json "${json}")
string(REPLACE "<caudal-bracket-open>" "[" json "${json}")
string(REPLACE "<caudal-bracket-close>" "]" json "${json}")
file(WRITE "${FILE}" "[\n${json}\n]\n")

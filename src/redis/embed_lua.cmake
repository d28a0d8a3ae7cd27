# cmake -DIN=<a.lua|b.lua|...> -DOUT=<file.cc> -DNAME=<Identifier> -P embed_lua.cmake
# Concatenates the .lua files in the order given (separated by '|', since a ';' list would split
# into separate command arguments) into one script, and writes a .cc defining
# caudal::redis::k<NAME>Script (the text) and k<NAME>Sha1 (its SHA1, the name Redis gives it in
# SCRIPT LOAD / EVALSHA).
string(REPLACE "|" ";" files "${IN}")
set(text "")
foreach(f IN LISTS files)
  file(READ ${f} part)
  string(APPEND text "${part}\n")
endforeach()
string(SHA1 sha "${text}")
string(FIND "${text}" ")caudal_lua\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-string delimiter")
endif()
file(WRITE ${OUT}.tmp
  "// Generated from ${IN} by embed_lua.cmake. Do not edit.\n"
  "#include \"redis/script.h\"\n\n"
  "namespace caudal::redis {\n\n"
  "const std::string_view k${NAME}Script = R\"caudal_lua(${text})caudal_lua\";\n"
  "const std::string_view k${NAME}Sha1 = \"${sha}\";\n\n"
  "}  // namespace caudal::redis\n")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.tmp)

# Warning flags for caudal's own targets (not applied globally, so third-party headers stay quiet).
add_library(caudal_warnings INTERFACE)
target_compile_options(caudal_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
  -Woverloaded-virtual -Wnull-dereference -Wimplicit-fallthrough)
if(CAUDAL_WERROR)
  target_compile_options(caudal_warnings INTERFACE -Werror)
endif()

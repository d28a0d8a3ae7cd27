# Warning flags for caudal's own targets (not applied globally, so third-party headers stay quiet).
add_library(caudal_warnings INTERFACE)
target_compile_options(caudal_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
  -Woverloaded-virtual -Wnull-dereference -Wimplicit-fallthrough)
if(CAUDAL_WERROR)
  target_compile_options(caudal_warnings INTERFACE -Werror)
endif()
# Under the sanitizers GCC 12's flow-based warnings see the instrumentation, not the code: Beast's
# and Asio's inlined internals trip -Wmaybe-uninitialized and -Wnull-dereference there and nowhere
# else (an empty boost::optional, a shared_ptr checked just before). The release build keeps them
# as errors; the sanitized build checks those bugs at run time instead.
if(CAUDAL_SANITIZE)
  target_compile_options(caudal_warnings INTERFACE -Wno-maybe-uninitialized -Wno-null-dereference)
endif()

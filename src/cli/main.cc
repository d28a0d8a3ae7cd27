// caudal: the command-line entry point. A dispatcher only: each subcommand lives in its own
// *_command.cc and registers itself (see command.h).
#include <iostream>

#include "cli/command.h"

int main(int argc, char** argv) {
  caudal::cli::Env env{.out = std::cout,
                       .err = std::cerr,
                       .clock = caudal::SystemClock::Instance(),
                       .stores_use_clock = false,
                       .wrap_store = nullptr};
  return caudal::cli::RunCommandLine(argc, argv, env);
}

// caudal: the command-line entry point. A dispatcher only: each subcommand lives in its own
// *_command.cc and registers itself (see command.h).
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>

#include "cli/command.h"

namespace caudal::cli {
namespace {

std::string Usage() {
  std::string u = "Usage: caudal <command> [flags]\n\nCommands:\n";
  for (const CommandInfo& c : RegisteredCommands()) {
    u += "  " + std::string(c.name) +
         std::string(c.name.size() < 12 ? 12 - c.name.size() : 1, ' ') + std::string(c.summary) +
         "\n";
  }
  u += "\nRun 'caudal <command> --help' for a command's flags.\n";
  return u;
}

const CommandInfo* Find(std::string_view name) {
  for (const CommandInfo& c : RegisteredCommands()) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

int Main(int argc, char** argv) {
  const std::string_view first = argc > 1 ? argv[1] : "";
  if (first == "--help" || first == "-h" || first == "help") {
    std::cout << Usage();
    return kExitOk;
  }
  if (first == "--version") {
    std::cout << "caudal " << CAUDAL_VERSION << "\n";
    return kExitOk;
  }
  const CommandInfo* info = Find(first);
  if (info == nullptr) {
    std::cerr << (first.empty() ? std::string("caudal: missing command")
                                : "caudal: unknown command \"" + std::string(first) + "\"")
              << "\n\n"
              << Usage();
    return kExitUsage;
  }

  CLI::App app(std::string(info->summary), "caudal " + std::string(info->name));
  const std::unique_ptr<Command> command = info->make();
  command->AddOptions(app);
  try {
    app.parse(argc - 1, argv + 1);
  } catch (const CLI::Success& e) {  // --help
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "caudal " << info->name << ": " << e.what() << "\n"
              << "Run 'caudal " << info->name << " --help' for usage.\n";
    return kExitUsage;
  }
  Env env{.out = std::cout, .err = std::cerr, .clock = SystemClock::Instance()};
  return command->Run(env);
}

}  // namespace
}  // namespace caudal::cli

int main(int argc, char** argv) { return caudal::cli::Main(argc, argv); }

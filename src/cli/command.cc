#include "cli/command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <string>
#include <vector>

#include "common/cat.h"

namespace caudal::cli {
namespace {

constexpr std::string_view kImpliedCommand = "serve";

// A function-local static, so registration from other files' static initialisers is safe
// whatever order they run in.
std::vector<CommandInfo>& Registry() {
  static std::vector<CommandInfo> commands;
  return commands;
}

std::string Usage() {
  std::string u = "Usage: caudal <command> [flags]\n\nCommands:\n";
  for (const CommandInfo& c : Registry()) {
    u += "  " + std::string(c.name) +
         std::string(c.name.size() < 12 ? 12 - c.name.size() : 1, ' ') + std::string(c.summary) +
         "\n";
  }
  u += "\nRun 'caudal <command> --help' for a command's flags. Flags without a command are\n"
       "serve's: 'caudal --config FILE' is 'caudal serve --config FILE'.\n";
  return u;
}

const CommandInfo* Find(std::string_view name) {
  for (const CommandInfo& c : Registry()) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

}  // namespace

bool RegisterCommand(CommandInfo info) {
  auto& commands = Registry();
  const auto at =
      std::lower_bound(commands.begin(), commands.end(), info.name,
                       [](const CommandInfo& c, std::string_view name) { return c.name < name; });
  commands.insert(at, std::move(info));
  return true;
}

std::span<const CommandInfo> RegisteredCommands() { return Registry(); }

int UsageError(Env& env, std::string_view command, std::string_view message) {
  env.err << "caudal " << command << ": " << message << "\n"
          << "Run 'caudal " << command << " --help' for usage.\n";
  return kExitUsage;
}

int Failure(Env& env, std::string_view command, int code, std::string_view message,
            LogFormat format) {
  if (format == LogFormat::kText) {
    if (code == kExitUsage) return UsageError(env, command, message);
    env.err << "caudal " << command << ": " << message << "\n";
    return code;
  }
  const Logger log({.format = LogFormat::kJson}, env.clock);
  env.err << log.Plain(LogLevel::kError, Cat("caudal ", command, ": ", message),
                       {{"exit_code", code}})
          << "\n";
  return code;
}

int RunCommandLine(int argc, char** argv, Env& env) {
  const std::string_view first = argc > 1 ? argv[1] : "";
  if (first == "--help" || first == "-h" || first == "help") {
    env.out << Usage();
    return kExitOk;
  }
  if (first == "--version" || first == "version") {
    env.out << "caudal " << CAUDAL_VERSION << "\n";
    return kExitOk;
  }
  // A leading flag other than those two is serve's: `caudal --config FILE` serves. A container
  // runs `caudal` itself, so arguments given to its image are a command or serve's flags.
  const bool implied_serve = first.starts_with('-');
  const CommandInfo* info = Find(implied_serve ? kImpliedCommand : first);
  if (info == nullptr) {
    env.err << (first.empty() ? std::string("caudal: missing command")
                              : "caudal: unknown command \"" + std::string(first) + "\"")
            << "\n\n"
            << Usage();
    return kExitUsage;
  }
  CLI::App app(std::string(info->summary), "caudal " + std::string(info->name));
  const std::unique_ptr<Command> command = info->make();
  command->AddOptions(app);
  try {
    // CLI11 skips the first argument it is given: the command's name, or the program's.
    const int skipped = implied_serve ? 0 : 1;
    app.parse(argc - skipped, argv + skipped);
  } catch (const CLI::Success& e) {  // --help
    return app.exit(e, env.out, env.err);
  } catch (const CLI::ParseError& e) {
    env.err << "caudal " << info->name << ": " << e.what() << "\n"
            << "Run 'caudal " << info->name << " --help' for usage.\n";
    return kExitUsage;
  }
  return command->Run(env);
}

}  // namespace caudal::cli

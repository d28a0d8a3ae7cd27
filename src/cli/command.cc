#include "cli/command.h"

#include <algorithm>
#include <vector>

namespace caudal::cli {
namespace {

// A function-local static, so registration from other files' static initialisers is safe
// whatever order they run in.
std::vector<CommandInfo>& Registry() {
  static std::vector<CommandInfo> commands;
  return commands;
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

}  // namespace caudal::cli

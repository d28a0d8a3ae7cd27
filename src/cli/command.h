// The `caudal` subcommands: one file each, registered with one line.
//
// To add `caudal foo`: write foo_command.cc with a class implementing Command (its AddOptions
// needs <CLI/CLI.hpp>, which this header leaves out) and, at namespace scope in that file,
//
//   CAUDAL_REGISTER_COMMAND(FooCommand, "foo", "One line for `caudal --help`");
//
// then add foo_command.cc to the `caudal_commands` sources in src/cli/CMakeLists.txt.
// Registration runs during static initialisation, which is why command files are an object
// library linked whole into each executable: a static library would drop a file nothing
// references.
//
// RunCommandLine parses the command line with CLI11, then calls Run on the chosen command.
// Commands write to the streams they are given (never to std::cout directly), so tests can
// capture them.
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <span>
#include <string_view>

#include "caudal/common/clock.h"
#include "caudal/observe/log.h"
#include "caudal/store/store.h"

// CLI11's application, defined by <CLI/CLI.hpp>: only the files that declare options or parse
// include it (the header alone costs seconds of compile time per file).
namespace CLI {
class App;
}  // namespace CLI

namespace caudal::cli {

// Exit codes shared by every command.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the command ran and failed (I/O, unreachable store)
inline constexpr int kExitUsage = 2;    // bad flags or bad input files

struct Env {
  std::ostream& out;
  std::ostream& err;
  const Clock& clock;  // the process's time: the SystemClock, made by main()
  // Stores decide at `clock`'s time rather than their own (Redis's TIME): for a build whose
  // clock is scripted.
  bool stores_use_clock = false;
  // When set, every store a command opens passes through it (a test build wraps the store).
  std::function<std::unique_ptr<Store>(std::unique_ptr<Store>)> wrap_store;
};

class Command {
 public:
  virtual ~Command() = default;
  // Declares the command's flags on its CLI11 subcommand; the values land in members.
  virtual void AddOptions(CLI::App& app) = 0;
  // Runs after a successful parse. Returns an exit code; for kExitUsage it has already written
  // a message naming the offending flag or input to env.err.
  virtual int Run(Env& env) = 0;
};

struct CommandInfo {
  std::string_view name;
  std::string_view summary;
  std::function<std::unique_ptr<Command>()> make;
};

// Adds a command to the registry; returns true so it can initialise a namespace-scope constant.
bool RegisterCommand(CommandInfo info);
// Every registered command, sorted by name.
std::span<const CommandInfo> RegisteredCommands();

// Writes "caudal <command>: <message>" and a pointer to --help to env.err; returns kExitUsage.
int UsageError(Env& env, std::string_view command, std::string_view message);
// Returns `code` having written the failure: as text, "caudal <command>: <message>" (as UsageError
// for kExitUsage); as JSON one error line with the exit code, so that a JSON-logging command
// writes nothing but objects.
int Failure(Env& env, std::string_view command, int code, std::string_view message,
            LogFormat format);

// `caudal <command> [flags]`: finds the command, parses its flags and runs it. The exit code.
// `caudal --flag ...` (a leading flag other than --help, -h and --version) is `caudal serve
// --flag ...`; `help` and `version` are --help's and --version's words.
int RunCommandLine(int argc, char** argv, Env& env);

}  // namespace caudal::cli

#define CAUDAL_REGISTER_COMMAND(Type, name, summary)                                        \
  namespace {                                                                               \
  [[maybe_unused]] const bool caudal_registered_##Type = ::caudal::cli::RegisterCommand(    \
      {name, summary, [] { return std::unique_ptr<::caudal::cli::Command>(new Type()); }}); \
  }

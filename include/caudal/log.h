// Log: one line per event, to a sink chosen by main() (stderr) or a test (a vector).
//
// Thread-safety: Log() may be called from any thread; the sink is called under a lock, so a
// sink needs no locking of its own.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <string_view>

namespace caudal {

enum class LogLevel : uint8_t { kInfo, kWarning, kError };
std::string_view LogLevelName(LogLevel level);

class Logger {
 public:
  using Sink = std::function<void(LogLevel, std::string_view)>;
  // Writes "<UTC time> <level> <message>" lines to stderr.
  Logger();
  explicit Logger(Sink sink) : sink_(std::move(sink)) {}

  void Log(LogLevel level, std::string_view message) const;
  void Info(std::string_view m) const { Log(LogLevel::kInfo, m); }
  void Warning(std::string_view m) const { Log(LogLevel::kWarning, m); }
  void Error(std::string_view m) const { Log(LogLevel::kError, m); }

 private:
  mutable std::mutex mu_;
  Sink sink_;  // guarded by mu_ (called under it)
};

}  // namespace caudal

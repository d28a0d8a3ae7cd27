#include "caudal/log.h"

#include <chrono>
#include <cstdio>
#include <ctime>

namespace caudal {

std::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
  }
  return "?";
}

Logger::Logger()
    : sink_([](LogLevel level, std::string_view m) {
        const auto now = std::chrono::system_clock::now();
        const std::time_t t = std::chrono::system_clock::to_time_t(now);
        std::tm tm{};
        gmtime_r(&t, &tm);
        char when[32];
        std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
        const std::string_view name = LogLevelName(level);
        std::fprintf(stderr, "%s %.*s %.*s\n", when, static_cast<int>(name.size()), name.data(),
                     static_cast<int>(m.size()), m.data());
      }) {}

void Logger::Log(LogLevel level, std::string_view message) const {
  std::lock_guard<std::mutex> lock(mu_);
  sink_(level, message);
}

}  // namespace caudal

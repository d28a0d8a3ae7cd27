// Log: one line per event, to a sink chosen by main() (stderr) or a test (a vector).
//
// A line is a message and optional fields. As text (the default):
//   2026-11-30T16:25:42Z warning store "redis" failed 5 times in a row ... policy=per-ip
// As JSON, one object per line, for log shippers:
//   {"time":"2026-11-30T16:25:42Z","level":"warning","msg":"...","policy":"per-ip"}
// Lines below the logger's level are dropped before anything is formatted.
//
// Thread-safety: every method may be called from any thread; the sink is called under a lock, so
// a sink needs no locking of its own.
#pragma once

#include <atomic>
#include <concepts>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <string>
#include <string_view>

#include "caudal/common/clock.h"
#include "caudal/common/status.h"

namespace caudal {

enum class LogLevel : uint8_t { kDebug, kInfo, kWarning, kError };
std::string_view LogLevelName(LogLevel level);
Result<LogLevel> ParseLogLevel(std::string_view text);  // debug|info|warning|error

enum class LogFormat : uint8_t { kText, kJson };
std::string_view LogFormatName(LogFormat format);
Result<LogFormat> ParseLogFormat(std::string_view text);  // text|json

// Which front end asked: the `api` label of the decision metrics.
enum class Api : uint8_t { kHttp, kRls, kCli, kRlqs };
inline constexpr size_t kApiCount = 4;
std::string_view ApiName(Api api);

// How an identity appears in logs and in the refusal tables: hashed, or as sent.
enum class IdentityDisplay : uint8_t { kHash, kValue };
std::string_view IdentityDisplayName(IdentityDisplay d);
Result<IdentityDisplay> ParseIdentityDisplay(std::string_view text);  // hash|value

// A field: text, or an integer, which JSON lines write as a number ({"retry_after_ms":1200}).
struct LogField {
  LogField(std::string_view k, std::string v) : key(k), value(std::move(v)) {}
  template <std::integral T>
  requires(!std::same_as<T, bool> && !std::same_as<T, char>) LogField(std::string_view k, T v)
      : key(k), value(std::to_string(v)), number(true) {}

  std::string_view key;  // [a-z_]: written as is
  std::string value;
  bool number = false;  // `value` is an integer's decimal digits
};

struct LoggerOptions {
  LogLevel level = LogLevel::kInfo;
  LogFormat format = LogFormat::kText;
};

class Logger {
 public:
  // Receives each formatted line, without its newline.
  using Sink = std::function<void(LogLevel, std::string_view line)>;

  // Lines to stderr, dated by `clock`'s wall time; `clock` must outlive this.
  Logger(LoggerOptions options, const Clock& clock);
  // Lines to `sink` (tests): "<level> <message>[ key=value...]" as text, the object as JSON
  // (without "time", so that tests need no clock).
  explicit Logger(Sink sink, LoggerOptions options = {});

  void Log(LogLevel level, std::string_view message,
           std::initializer_list<LogField> fields = {}) const;
  void Debug(std::string_view m, std::initializer_list<LogField> f = {}) const {
    Log(LogLevel::kDebug, m, f);
  }
  void Info(std::string_view m, std::initializer_list<LogField> f = {}) const {
    Log(LogLevel::kInfo, m, f);
  }
  void Warning(std::string_view m, std::initializer_list<LogField> f = {}) const {
    Log(LogLevel::kWarning, m, f);
  }
  void Error(std::string_view m, std::initializer_list<LogField> f = {}) const {
    Log(LogLevel::kError, m, f);
  }

  // A line for stdout, which people and scripts read (the start-up banner): as text exactly
  // `text`; as JSON an info line like any other, `text` its "msg", with `fields`.
  std::string Banner(std::string_view text, std::initializer_list<LogField> fields = {}) const {
    return Plain(LogLevel::kInfo, text, fields);
  }
  // The same at `level`, whatever the logger's level (a start-up failure on stderr).
  std::string Plain(LogLevel level, std::string_view text,
                    std::initializer_list<LogField> fields = {}) const;

  bool Enabled(LogLevel level) const { return level >= level_.load(std::memory_order_relaxed); }
  // A reload may change them.
  void SetOptions(LoggerOptions options);

 private:
  std::string Format(LogLevel level, std::string_view message,
                     std::initializer_list<LogField> fields) const;

  const Clock* clock_ = nullptr;  // null: no time in lines (a test sink)
  std::atomic<LogLevel> level_;
  std::atomic<LogFormat> format_;
  mutable std::mutex mu_;
  Sink sink_;  // guarded by mu_ (called under it)
};

}  // namespace caudal

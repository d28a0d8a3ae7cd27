#include "caudal/observe/log.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "common/cat.h"
#include "common/utf8.h"

namespace caudal {
namespace {

// `s` with every control character (ControlCharacterLength: C0, DEL, C1, U+2028, U+2029) as a
// \u escape, and every byte that is not UTF-8 as \ufffd, so a line stays one line of UTF-8 that
// drives no terminal; `quotes` also escapes quotes and backslashes (a JSON string's content).
void AppendLogEscaped(std::string& out, std::string_view s, bool quotes) {
  for (size_t i = 0; i < s.size();) {
    const std::string_view rest = s.substr(i);
    if (const size_t n = ControlCharacterLength(rest); n > 0) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(ControlCharacter(rest)));
      out += buf;
      i += n;
    } else if (const size_t m = Utf8SequenceLength(rest); m == 0) {
      out += "\\ufffd";
      ++i;
    } else {
      if (quotes && (s[i] == '"' || s[i] == '\\')) out += '\\';
      out.append(rest.substr(0, m));
      i += m;
    }
  }
}

// A JSON string, quotes included.
void AppendJsonString(std::string& out, std::string_view s) {
  out += '"';
  AppendLogEscaped(out, s, /*quotes=*/true);
  out += '"';
}

// A text field value: bare when it is one simple word, quoted otherwise.
void AppendTextValue(std::string& out, std::string_view v) {
  const bool bare = !v.empty() && v.find_first_of(" \"=\\") == std::string_view::npos &&
                    std::all_of(v.begin(), v.end(), [](char c) { return c >= 0x21 && c < 0x7f; });
  if (bare) {
    out += v;
  } else {
    AppendJsonString(out, v);
  }
}

std::string UtcTime(Nanos now) {
  const std::time_t t =
      static_cast<std::time_t>(std::chrono::duration_cast<std::chrono::seconds>(now).count());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return when;
}

}  // namespace

std::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "?";
}

Result<LogLevel> ParseLogLevel(std::string_view text) {
  for (LogLevel l : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarning, LogLevel::kError}) {
    if (LogLevelName(l) == text) return l;
  }
  return Status::InvalidArgument(
      Cat("expected debug, info, warning or error (got ", Quoted(text), ')'));
}

std::string_view LogFormatName(LogFormat format) {
  return format == LogFormat::kJson ? "json" : "text";
}

Result<LogFormat> ParseLogFormat(std::string_view text) {
  if (text == "text") return LogFormat::kText;
  if (text == "json") return LogFormat::kJson;
  return Status::InvalidArgument(Cat("expected text or json (got ", Quoted(text), ')'));
}

Logger::Logger(LoggerOptions options, const Clock& clock)
    : clock_(&clock),
      level_(options.level),
      format_(options.format),
      sink_([](LogLevel, std::string_view line) {
        std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
      }) {}

Logger::Logger(Sink sink, LoggerOptions options)
    : level_(options.level), format_(options.format), sink_(std::move(sink)) {}

void Logger::SetOptions(LoggerOptions options) {
  level_.store(options.level, std::memory_order_relaxed);
  format_.store(options.format, std::memory_order_relaxed);
}

std::string Logger::Format(LogLevel level, std::string_view message,
                           std::initializer_list<LogField> fields) const {
  std::string line;
  line.reserve(64 + message.size());
  if (format_.load(std::memory_order_relaxed) == LogFormat::kJson) {
    line += '{';
    if (clock_ != nullptr) {
      line += "\"time\":";
      AppendJsonString(line, UtcTime(clock_->Now()));
      line += ',';
    }
    line += "\"level\":";
    AppendJsonString(line, LogLevelName(level));
    line += ",\"msg\":";
    AppendJsonString(line, message);
    for (const LogField& f : fields) {
      line += ',';
      AppendJsonString(line, f.key);
      line += ':';
      if (f.number) {
        line += f.value;
      } else {
        AppendJsonString(line, f.value);
      }
    }
    line += '}';
    return line;
  }
  if (clock_ != nullptr) line += Cat(UtcTime(clock_->Now()), ' ');
  line += LogLevelName(level);
  line += ' ';
  AppendLogEscaped(line, message, /*quotes=*/false);
  for (const LogField& f : fields) {
    line += ' ';
    line += f.key;
    line += '=';
    AppendTextValue(line, f.value);
  }
  return line;
}

std::string Logger::Plain(LogLevel level, std::string_view text,
                          std::initializer_list<LogField> fields) const {
  if (format_.load(std::memory_order_relaxed) == LogFormat::kText) return std::string(text);
  return Format(level, text, fields);
}

void Logger::Log(LogLevel level, std::string_view message,
                 std::initializer_list<LogField> fields) const {
  if (!Enabled(level)) return;
  const std::string line = Format(level, message, fields);
  std::lock_guard<std::mutex> lock(mu_);
  sink_(level, line);
}

}  // namespace caudal

#include "server/query_string.h"

#include "common/cat.h"

namespace caudal::http_api {
namespace {

int Hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

ApiError BadQuery(std::string code, std::string message) {
  return {.status = 400, .code = std::move(code), .message = std::move(message)};
}

}  // namespace

std::optional<std::string> PercentDecode(std::string_view s, Plus plus) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      const int hi = i + 1 < s.size() ? Hex(s[i + 1]) : -1;
      const int lo = i + 2 < s.size() ? Hex(s[i + 2]) : -1;
      if (hi < 0 || lo < 0) return std::nullopt;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else {
      out.push_back(plus == Plus::kSpace && s[i] == '+' ? ' ' : s[i]);
    }
  }
  return out;
}

const std::string* ParsedQuery::Find(std::string_view name) const {
  for (const QueryParam& p : params) {
    if (p.name == name) return &p.value;
  }
  return nullptr;
}

ParsedQuery ParseQuery(std::string_view target) {
  ParsedQuery out;
  const size_t q = target.find('?');
  std::string_view rest = q == std::string_view::npos ? std::string_view() : target.substr(q + 1);
  const auto refuse = [&out](ApiError e) {
    out.params.clear();
    out.error = std::move(e);
    return std::move(out);
  };
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    std::optional<std::string> name = PercentDecode(pair.substr(0, eq), Plus::kSpace);
    std::optional<std::string> value = PercentDecode(
        eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1), Plus::kSpace);
    if (!name || !value) {
      return refuse(BadQuery(
          "invalid_parameter",
          Cat("the query: bad percent-encoding in ", Quoted(pair.substr(0, kMaxQuotedParameter)))));
    }
    if (out.params.size() == kMaxQueryParams) {
      return refuse(BadQuery("invalid_parameter",
                             Cat("the query: more than ", kMaxQueryParams, " parameters")));
    }
    if (out.Find(*name) != nullptr) {
      return refuse(BadQuery("duplicate_parameter",
                             Cat("parameter ", Quoted(name->substr(0, kMaxQuotedParameter)),
                                 ": given twice (ambiguous; refused)")));
    }
    out.params.push_back({.name = std::move(*name), .value = std::move(*value)});
  }
  return out;
}

}  // namespace caudal::http_api

#include "common/redact.h"

namespace caudal {

std::string RedactUrl(std::string_view url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string_view::npos) return std::string(url);
  const size_t start = scheme + 3;
  const size_t at = url.rfind('@');
  if (at == std::string_view::npos || at < start) return std::string(url);
  const std::string_view userinfo = url.substr(start, at - start);
  const size_t colon = userinfo.find(':');
  if (colon == std::string_view::npos) return std::string(url);  // a user name, no password
  std::string out(url.substr(0, start + colon + 1));
  out += "***";
  out += url.substr(at);
  return out;
}

}  // namespace caudal

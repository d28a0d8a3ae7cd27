#include "common/caller_auth.h"

#include <algorithm>

namespace caudal {

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  // Every byte of the longer one is read, so the time depends on the lengths alone.
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const auto x = static_cast<unsigned char>(i < a.size() ? a[i] : 0);
    const auto y = static_cast<unsigned char>(i < b.size() ? b[i] : 0);
    diff = static_cast<unsigned char>(diff | (x ^ y));
  }
  return diff == 0;
}

std::string_view BearerToken(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() <= kScheme.size()) return {};
  for (size_t i = 0; i < kScheme.size(); ++i) {
    const char c = authorization[i];
    if ((c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c) != kScheme[i]) return {};
  }
  std::string_view token = authorization.substr(kScheme.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  return token;
}

CallerVerdict CheckCaller(const CallerAuth& auth, std::string_view authorization,
                          std::span<const std::string> identities) {
  if (!auth.enabled()) return CallerVerdict::kAllowed;
  const std::string_view token = BearerToken(authorization);
  if (!auth.token.empty() && !token.empty() && ConstantTimeEquals(token, auth.token)) {
    return CallerVerdict::kAllowed;
  }
  for (const std::string& id : identities) {
    if (std::find(auth.allowed.begin(), auth.allowed.end(), id) != auth.allowed.end()) {
      return CallerVerdict::kAllowed;
    }
  }
  if (!authorization.empty()) return CallerVerdict::kBadToken;
  if (!identities.empty() && !auth.allowed.empty()) return CallerVerdict::kNotAllowed;
  return CallerVerdict::kNoCredentials;
}

}  // namespace caudal

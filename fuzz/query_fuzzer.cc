// Fuzzer for the one query-string parser (server/query_string.h) and the endpoints' readers on
// top of it: /v1/auth's statuses, /v1/check's refusal, the admin API's identity.
//
// The input is a request target. Checked: a query is either refused (400 invalid_parameter or
// duplicate_parameter, a bounded message, nothing read) or read into at most kMaxQueryParams
// parameters with distinct names; what was read, encoded again, reads back the same; decoding
// never lengthens its input and undoes encoding whatever the bytes; the endpoints agree with the
// parser (a query it refuses they refuse the same way, the admin API's identity is its
// parameters) and /v1/auth's statuses stay from 400 to 599. Never a crash, an overflow or an
// exception.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "server/admin_api.h"
#include "server/auth_query.h"
#include "server/query_string.h"

namespace caudal {
namespace {

using http_api::ParsedQuery;
using http_api::Plus;

// Every byte but the unreserved ones as %XX, so that nothing reads as a separator or a space.
std::string Encode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out.push_back(c);
    } else {
      out += {'%', kHex[u >> 4], kHex[u & 15]};
    }
  }
  return out;
}

void CheckQuery(std::string_view target) {
  const ParsedQuery q = http_api::ParseQuery(target);
  if (q.error) {
    FUZZ_CHECK(q.params.empty());
    FUZZ_CHECK(q.error->status == 400);
    FUZZ_CHECK(q.error->code == "invalid_parameter" || q.error->code == "duplicate_parameter");
    FUZZ_CHECK(q.error->message.size() < 256);
    return;
  }
  FUZZ_CHECK(q.params.size() <= http_api::kMaxQueryParams);
  std::string again = "/?";
  for (size_t i = 0; i < q.params.size(); ++i) {
    const http_api::QueryParam& p = q.params[i];
    FUZZ_CHECK(q.Find(p.name) == &p.value);  // names are distinct: the first is the only one
    again += Encode(p.name) + '=' + Encode(p.value) + '&';
  }
  const ParsedQuery back = http_api::ParseQuery(again);
  FUZZ_CHECK(!back.error);
  FUZZ_CHECK(back.params.size() == q.params.size());
  for (size_t i = 0; i < q.params.size(); ++i) {
    FUZZ_CHECK(back.params[i].name == q.params[i].name);
    FUZZ_CHECK(back.params[i].value == q.params[i].value);
  }
}

void CheckDecode(std::string_view s) {
  for (Plus plus : {Plus::kLiteral, Plus::kSpace}) {
    const std::optional<std::string> d = http_api::PercentDecode(s, plus);
    if (d) FUZZ_CHECK(d->size() <= s.size());
    if (s.find('%') == std::string_view::npos) {
      FUZZ_CHECK(d.has_value());
      if (plus == Plus::kLiteral) FUZZ_CHECK(*d == s);
    }
    FUZZ_CHECK(http_api::PercentDecode(Encode(s), plus) == std::string(s));
  }
}

void CheckEndpoints(std::string_view target) {
  const ParsedQuery q = http_api::ParseQuery(target);
  const http_api::ParsedAuthQuery auth = http_api::ParseAuthQuery(target);
  if (q.error) {
    FUZZ_CHECK(auth.error && auth.error->code == q.error->code);
  } else if (!auth.error) {
    FUZZ_CHECK(auth.statuses.refused >= 400 && auth.statuses.refused <= 599);
    FUZZ_CHECK(auth.statuses.unavailable >= 400 && auth.statuses.unavailable <= 599);
  }
  const std::optional<http_api::ApiError> check = http_api::RefuseCheckQuery(target);
  FUZZ_CHECK(check.has_value() == (q.error || !q.params.empty()));
  if (check && !q.error) FUZZ_CHECK(check->code == "unknown_parameter");

  const size_t mark = target.find('?');
  const std::string admin =
      "/v1/admin/policies/p/state" +
      (mark == std::string_view::npos ? std::string() : std::string(target.substr(mark)));
  const admin_api::ParsedPath path = admin_api::ParseAdminTarget(admin);
  if (q.error) FUZZ_CHECK(path.error && path.error->code == q.error->code);
  if (path.error) return;
  FUZZ_CHECK(path.path.policy == "p" && path.path.state);
  FUZZ_CHECK(path.path.params.size() == q.params.size());
  for (size_t i = 0; i < q.params.size(); ++i) {
    FUZZ_CHECK(path.path.params[i].first == q.params[i].name);
    FUZZ_CHECK(path.path.params[i].second == q.params[i].value);
  }
}

}  // namespace
}  // namespace caudal

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view target(reinterpret_cast<const char*>(data), size);
  caudal::CheckQuery(target);
  caudal::CheckDecode(target);
  caudal::CheckEndpoints(target);
  return 0;
}

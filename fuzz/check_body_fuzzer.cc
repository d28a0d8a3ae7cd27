// Fuzzer for the POST /v1/check body parser (a client's JSON, untrusted).
//
// Any body either parses into a request the limiter can be asked (1 or more descriptors, a cost,
// if given, of at least 1, no key repeated in any object, every descriptor value well-formed
// UTF-8 without a control character) or is refused with a 400 whose code is one of the documented
// ones and whose error reply is itself valid JSON naming that code, whatever bytes the body quoted
// back; and the one pass that reads it builds what Boost.JSON's parser builds. Never a crash, an
// overflow or an exception.
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "server/http_api.h"
#include "server/json_keys.h"

namespace caudal {
namespace {

bool KnownCode(std::string_view code) {
  for (std::string_view c :
       {"invalid_json", "invalid_body", "unknown_field", "missing_descriptors",
        "invalid_descriptors", "invalid_cost", "invalid_refund", "duplicate_field"}) {
    if (code == c) return true;
  }
  return false;
}

void Run(std::string_view body) {
  // The one-pass reader (json_keys.h) agrees with Boost.JSON's own parser on every text.
  boost::json::parse_options options;
  options.max_depth = 8;
  boost::json::error_code ec_ref;
  const boost::json::value reference = boost::json::parse(body, ec_ref, {}, options);
  const http_api::ParsedJson once = http_api::ParseJson(body, 8);
  FUZZ_CHECK(static_cast<bool>(ec_ref) == static_cast<bool>(once.error));
  if (!ec_ref && !once.repeated) FUZZ_CHECK(reference == once.value);

  const http_api::ParsedCheck parsed = http_api::ParseCheckBody(body);
  if (!parsed.error) {
    FUZZ_CHECK(!parsed.request.descriptors.empty());
    FUZZ_CHECK(!parsed.request.cost || *parsed.request.cost >= 1);
    FUZZ_CHECK(!http_api::FindRepeatedKey(body, 8).has_value());
    for (const Descriptor& d : parsed.request.descriptors) {
      FUZZ_CHECK(!http_api::IdentityValueProblem(d.value).has_value());
    }
    return;
  }
  const http_api::ApiError& e = *parsed.error;
  FUZZ_CHECK(e.status == 400);
  FUZZ_CHECK(KnownCode(e.code));
  FUZZ_CHECK(!e.message.empty());
  const http_api::Reply reply = http_api::ErrorReply(e);
  boost::json::error_code ec;
  const boost::json::value v = boost::json::parse(reply.body, ec);
  FUZZ_CHECK(!ec);
  const boost::json::value* code = v.as_object().at("error").as_object().if_contains("code");
  FUZZ_CHECK(code != nullptr && code->is_string() && code->as_string() == e.code);
}

}  // namespace
}  // namespace caudal

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  caudal::Run(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}

#include "server/idempotency.h"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <boost/json/serialize.hpp>
#include <charconv>
#include <memory>
#include <utility>
#include <vector>

#include "common/cat.h"

namespace caudal::idempotency {
namespace {

namespace json = boost::json;
using http_api::ApiError;
using http_api::Reply;

ApiError InvalidKey(std::string message) {
  return {.status = 400, .code = "invalid_idempotency_key", .message = std::move(message)};
}

std::string Hex(const unsigned char* data, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[data[i] >> 4];
    out[2 * i + 1] = kDigits[data[i] & 0xf];
  }
  return out;
}

std::string Sha256Hex(std::string_view text) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  EVP_Digest(text.data(), text.size(), digest.data(), &size, EVP_sha256(), nullptr);
  return Hex(digest.data(), size);
}

void AppendCanonical(const json::value& v, std::string& out) {
  if (v.is_object()) {
    const json::object& o = v.get_object();
    std::vector<const json::key_value_pair*> pairs;
    pairs.reserve(o.size());
    for (const auto& kv : o) pairs.push_back(&kv);
    std::sort(pairs.begin(), pairs.end(),
              [](const auto* a, const auto* b) { return a->key() < b->key(); });
    out.push_back('{');
    for (size_t i = 0; i < pairs.size(); ++i) {
      if (i > 0) out.push_back(',');
      out.append(json::serialize(json::string_view(pairs[i]->key()))).push_back(':');
      AppendCanonical(pairs[i]->value(), out);
    }
    out.push_back('}');
    return;
  }
  if (v.is_array()) {
    out.push_back('[');
    bool first = true;
    for (const json::value& e : v.get_array()) {
      if (!first) out.push_back(',');
      first = false;
      AppendCanonical(e, out);
    }
    out.push_back(']');
    return;
  }
  out.append(json::serialize(v));
}

Reply Refusal(int status, std::string code, std::string message) {
  Reply r = http_api::ErrorReply(
      {.status = status, .code = std::move(code), .message = std::move(message)});
  if (status == 409) r.headers.Add("Retry-After", 1);
  return r;
}

// ParseKeyField, but for the key of a refused field, partly read.
ParsedKey ReadKeyField(std::string_view value, size_t count) {
  ParsedKey out;
  if (count > 1) {
    out.error =
        InvalidKey(Cat("header Idempotency-Key: given ", count, " times (a request has one key)"));
    return out;
  }
  // Beast hands the value without its surrounding whitespace.
  if (value.starts_with('"')) {
    size_t i = 1;
    for (; i < value.size() && value[i] != '"'; ++i) {
      char c = value[i];
      if (c == '\\') {
        if (i + 1 >= value.size() || (value[i + 1] != '"' && value[i + 1] != '\\')) {
          out.error = InvalidKey("header Idempotency-Key: only \\\" and \\\\ may be escaped");
          return out;
        }
        c = value[++i];
      } else if (c < 0x20 || c > 0x7e) {
        out.error =
            InvalidKey("header Idempotency-Key: a key is printable ASCII (an sf-string, RFC 8941)");
        return out;
      }
      out.key.push_back(c);
    }
    if (i >= value.size()) {
      out.error = InvalidKey("header Idempotency-Key: the string has no closing quote");
      return out;
    }
    if (i + 1 != value.size()) {
      out.error =
          InvalidKey("header Idempotency-Key: nothing may follow the quoted key (no parameters)");
      return out;
    }
  } else {
    for (const char c : value) {
      if (c <= 0x20 || c > 0x7e || c == '"' || c == '\\') {
        out.error = InvalidKey(
            "header Idempotency-Key: an unquoted key is visible ASCII without quotes, "
            "backslashes or spaces (or send it quoted: an sf-string, RFC 8941)");
        return out;
      }
    }
    out.key = std::string(value);
  }
  if (out.key.empty()) {
    out.error = InvalidKey("header Idempotency-Key: the key is empty");
  } else if (out.key.size() > kMaxKeyChars) {
    out.error = InvalidKey(Cat("header Idempotency-Key: ", out.key.size(), " characters (at most ",
                               kMaxKeyChars, ')'));
  }
  return out;
}

}  // namespace

ParsedKey ParseKeyField(std::string_view value, size_t count) {
  ParsedKey out = ReadKeyField(value, count);
  if (out.error) out.key.clear();
  return out;
}

std::string CallerScope(const CallerAuth& caller, std::span<const std::string> identities) {
  if (!caller.enabled()) return {};
  for (const std::string& id : identities) {
    if (std::find(caller.allowed.begin(), caller.allowed.end(), id) != caller.allowed.end()) {
      std::string scope = "certificate";
      for (const std::string& each : identities) scope.append(1, '\0').append(each);
      return scope;
    }
  }
  return "token";
}

std::string IdentityScope(std::string caller, const json::value& body) {
  if (const json::object* o = body.if_object()) {
    for (const char* identity : {"descriptors", "reservation"}) {
      if (const json::value* v = o->if_contains(identity)) {
        caller.append(1, '\0').append(identity).append(1, '\0').append(Canonical(*v));
      }
    }
  }
  return caller;
}

std::string RecordKey(std::string_view endpoint, std::string_view scope, std::string_view key) {
  // Each part's length first: no two (endpoint, scope, key) write the same text.
  return Sha256Hex(Cat("caudal-idempotency-v1 ", endpoint.size(), ':', endpoint, scope.size(), ':',
                       scope, key.size(), ':', key));
}

std::string Canonical(const json::value& body) {
  std::string out;
  AppendCanonical(body, out);
  return out;
}

std::string Fingerprint(const json::value& body) { return Sha256Hex(Canonical(body)); }

std::string EncodeReply(const Reply& reply) {
  return Cat(reply.status, '\n', reply.content_type, '\n', reply.body);
}

std::optional<Reply> DecodeReply(std::string_view text) {
  const size_t a = text.find('\n');
  if (a == std::string_view::npos) return std::nullopt;
  const size_t b = text.find('\n', a + 1);
  if (b == std::string_view::npos) return std::nullopt;
  int status = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + a, status);
  if (ec != std::errc() || end != text.data() + a || status < 100 || status > 599) {
    return std::nullopt;
  }
  Reply r;
  r.status = status;
  r.content_type = std::string(text.substr(a + 1, b - a - 1));
  r.body = std::string(text.substr(b + 1));
  return r;
}

bool Replayable(std::string_view kept) { return DecodeReply(kept).has_value(); }

void Run(const Idempotency& idempotency, const IdempotencyOptions& options, std::string record,
         std::string fingerprint, Decide decide, std::function<void(Reply)> answer) {
  // The first answer, whole: its RateLimit and Retry-After fields go to its client, not to the
  // record.
  auto first = std::make_shared<Reply>();
  idempotency.Run(
      options, std::move(record), std::move(fingerprint),
      [decide = std::move(decide), first](const Status& records, Idempotency::Then then) {
        decide(records, [first, then = std::move(then)](Reply reply) {
          *first = std::move(reply);
          const bool charged = first->status == 200 || first->status == 429;
          then(EncodeReply(*first), charged);
        });
      },
      [first, answer = std::move(answer)](KeyedOutcome outcome, std::string kept) {
        switch (outcome) {
          case KeyedOutcome::kDecided:
            return answer(std::move(*first));
          case KeyedOutcome::kReplayed: {
            Reply replayed = *DecodeReply(kept);  // Replayable
            replayed.headers.Add(kReplayedHeader, "true");
            return answer(std::move(replayed));
          }
          case KeyedOutcome::kInProgress:
            return answer(Refusal(409, "idempotency_key_in_use",
                                  "a request with this Idempotency-Key is being decided; retry "
                                  "once it is answered"));
          case KeyedOutcome::kMismatch:
            return answer(Refusal(422, "idempotency_key_reused",
                                  "this Idempotency-Key was used for another request body; "
                                  "nothing was charged"));
        }
      });
}

}  // namespace caudal::idempotency

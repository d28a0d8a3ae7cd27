// `caudal admin`: the admin API (docs/http-api.md, "Admin API") from a shell, over HTTP.
//
//   caudal admin overrides set per-tenant tenant=acme
//       --limits '[{"algorithm": "token_bucket", "capacity": 5000, "refill": "5000/1m"}]'
//       --expires-in 1h
//   caudal admin overrides set provider-tokens tenant=acme --weight 4     (a policy with share)
//   caudal admin overrides list per-tenant
//   caudal admin overrides delete per-tenant tenant=acme
//   caudal admin state get per-tenant tenant=acme
//   caudal admin state reset per-tenant tenant=acme
//
// --url names the instance (http://127.0.0.1:8080 by default); the admin token comes from
// --token-file or CAUDAL_ADMIN_TOKEN and is never printed. Prints the answer's JSON; exits 0 on
// a 2xx, 1 otherwise (the answer's error on stderr), 2 for bad flags.
#include <CLI/CLI.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "caudal/config/config.h"
#include "cli/command.h"
#include "common/cat.h"

namespace caudal::cli {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

std::string Encode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(c);
    } else {
      out += {'%', kHex[u >> 4], kHex[u & 15]};
    }
  }
  return out;
}

class AdminCommand final : public Command {
 public:
  void AddOptions(CLI::App& app) override {
    app.add_option("args", args_,
                   "overrides set|list|delete POLICY [NAME=VALUE...], or state get|reset POLICY "
                   "NAME=VALUE...")
        ->required();
    app.add_option("--url", url_, "the caudal instance's HTTP address")
        ->type_name("URL")
        ->capture_default_str();
    app.add_option("--token-file", token_file_, "the admin token (else CAUDAL_ADMIN_TOKEN)")
        ->type_name("FILE");
    app.add_option("--limits", limits_, "overrides set: the limits, a JSON array as in the API")
        ->type_name("JSON");
    app.add_option("--expires-in", expires_in_, "overrides set: when the override ends (1h)")
        ->type_name("DURATION");
    weight_option_ =
        app.add_option("--weight", weight_,
                       "overrides set, a policy with share: the identity's weight (1 to 4096)");
  }

  int Run(Env& env) override {
    if (args_.size() < 3)
      return UsageError(env, "admin", "expected WHAT VERB POLICY [NAME=VALUE...]");
    const std::string& what = args_[0];
    const std::string& verb = args_[1];
    std::string method;
    if (what == "overrides") {
      method = verb == "set" ? "PUT" : verb == "list" ? "GET" : verb == "delete" ? "DELETE" : "";
    } else if (what == "state") {
      method = verb == "get" ? "GET" : verb == "reset" ? "DELETE" : "";
    }
    if (method.empty()) {
      return UsageError(
          env, "admin",
          "expected overrides set|list|delete or state get|reset (got " + what + " " + verb + ")");
    }
    std::string target = Cat("/v1/admin/policies/", Encode(args_[2]), '/', what);
    for (size_t i = 3; i < args_.size(); ++i) {
      const size_t eq = args_[i].find('=');
      if (eq == std::string::npos || eq == 0) {
        return UsageError(env, "admin", "expected NAME=VALUE (got " + args_[i] + ")");
      }
      target += Cat(i == 3 ? '?' : '&', Encode(args_[i].substr(0, eq)), '=',
                    Encode(args_[i].substr(eq + 1)));
    }
    std::string body;
    if (method == "PUT") {
      const bool weight = weight_option_->count() > 0;
      if (limits_.empty() && !weight) {
        return UsageError(env, "admin", "overrides set needs --limits (or --weight)");
      }
      body = limits_.empty() ? Cat("{\"weight\": ", weight_) : "{\"limits\": " + limits_;
      if (!limits_.empty() && weight) body += Cat(", \"weight\": ", weight_);
      if (!expires_in_.empty()) {
        for (const char c : expires_in_) {
          if (std::isalnum(static_cast<unsigned char>(c)) == 0) {
            return UsageError(env, "admin", "--expires-in: expected a duration such as 1h");
          }
        }
        body += ", \"expires_in\": \"" + expires_in_ + "\"";
      }
      body += "}";
    }
    std::string token;
    if (!token_file_.empty()) {
      auto t = ReadSecretFile(token_file_, "--token-file");
      if (!t.ok()) return UsageError(env, "admin", t.status().message());
      token = std::move(*t);
    } else if (const char* t = std::getenv("CAUDAL_ADMIN_TOKEN"); t != nullptr) {
      token = t;
    }
    if (token.empty())
      return UsageError(env, "admin", "no admin token: --token-file or CAUDAL_ADMIN_TOKEN");
    return Send(env, method, target, body, token);
  }

 private:
  int Send(Env& env, const std::string& method, const std::string& target, const std::string& body,
           const std::string& token) {
    constexpr std::string_view kScheme = "http://";
    if (!url_.starts_with(kScheme)) {
      return UsageError(env, "admin", "--url: expected http://HOST:PORT");
    }
    const std::string authority =
        url_.substr(kScheme.size(), url_.find('/', kScheme.size()) - kScheme.size());
    auto hp = ParseHostPort(authority);
    if (!hp.ok()) return UsageError(env, "admin", "--url: " + hp.status().message());
    try {
      boost::asio::io_context io;
      tcp::resolver resolver(io);
      beast::tcp_stream stream(io);
      stream.expires_after(std::chrono::seconds(10));
      stream.connect(resolver.resolve(hp->first, std::to_string(hp->second)));
      http::request<http::string_body> req(http::string_to_verb(method), target, 11);
      req.set(http::field::host, authority);
      req.set(http::field::authorization, "Bearer " + token);
      if (!body.empty()) {
        req.set(http::field::content_type, "application/json");
        req.body() = body;
      }
      req.prepare_payload();
      http::write(stream, req);
      beast::flat_buffer buffer;
      http::response_parser<http::string_body> parser;
      parser.body_limit(1 << 20);
      http::read(stream, buffer, parser);
      const auto& res = parser.get();
      const bool ok = res.result_int() / 100 == 2;
      (ok ? env.out : env.err) << (ok ? "" : Cat("caudal admin: HTTP ", res.result_int(), ": "))
                               << res.body() << "\n";
      return ok ? kExitOk : kExitFailure;
    } catch (const std::exception& e) {  // Beast's synchronous calls throw; none escapes
      env.err << "caudal admin: " << url_ << ": " << e.what() << "\n";
      return kExitFailure;
    }
  }

  std::vector<std::string> args_;
  std::string url_ = "http://127.0.0.1:8080";
  std::string token_file_;
  std::string limits_;
  std::string expires_in_;
  int64_t weight_ = 0;
  CLI::Option* weight_option_ = nullptr;
};

}  // namespace

CAUDAL_REGISTER_COMMAND(AdminCommand, "admin",
                        "Runtime overrides and an identity's state, over the admin API");

}  // namespace caudal::cli

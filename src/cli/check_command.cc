// `caudal check`: one decision from a shell, printed as JSON.
// Exit 0 allowed, 1 refused, 2 usage or config error, 3 store unavailable.
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "caudal/config/config.h"
#include "caudal/engine/engine.h"
#include "cli/command.h"
#include "cli/overrides.h"
#include "config/store_registry.h"
#include "server/http_api.h"

namespace caudal::cli {
namespace {

constexpr std::string_view kCheckCommand = "check";
constexpr int kExitRefused = 1;
constexpr int kExitStoreUnavailable = 3;

class CheckCommand final : public Command {
 public:
  void AddOptions(CLI::App& app) override {
    app.add_option("--config", config_, "the YAML config file")
        ->type_name("FILE")
        ->envname("CAUDAL_CONFIG")
        ->required();
    app.add_option("--store", flags_.store_url, "store URL, overriding store.url")
        ->type_name("URL");
    app.add_option("--descriptor", descriptors_, "a descriptor of the request (repeatable)")
        ->type_name("KEY=VALUE")
        ->required();
    app.add_option("--cost", cost_, "units this request costs (default: each policy's cost)")
        ->type_name("N");
  }

  int Run(Env& env) override {
    auto config = LoadConfigFile(config_);
    if (!config.ok()) return UsageError(env, kCheckCommand, config.status().message());
    if (Status s = ApplyOverrides(*config, flags_, std::getenv); !s.ok()) {
      return UsageError(env, kCheckCommand, s.message());
    }
    CheckRequest request;
    for (const std::string& d : descriptors_) {
      const size_t eq = d.find('=');
      if (eq == std::string::npos || eq == 0) {
        return UsageError(env, kCheckCommand, "--descriptor " + d + ": expected KEY=VALUE");
      }
      request.descriptors.push_back({d.substr(0, eq), d.substr(eq + 1)});
    }
    request.cost = cost_;
    request.api = Api::kCli;
    auto store = OpenStore(config->store, env.clock, {.decide_on_clock = env.stores_use_clock});
    if (!store.ok()) {
      if (store.status().code() == StatusCode::kInvalidArgument) {
        return UsageError(env, kCheckCommand, store.status().message());
      }
      return Unavailable(env, store.status());
    }
    if (env.wrap_store) *store = env.wrap_store(std::move(*store));
    if (Status s = (*store)->Ping(); !s.ok()) return Unavailable(env, s);
    Engine engine(**store, env.clock, {});
    if (Status s = engine.SetPolicies(StrictCopy(*config)); !s.ok()) {
      return UsageError(env, kCheckCommand, s.message());
    }
    auto result = engine.Check(std::move(request));
    if (!result.ok()) return UsageError(env, kCheckCommand, result.status().message());
    const http_api::Reply reply = http_api::DecisionReply(*result, http_api::Endpoint::kCheck);
    env.out << reply.body << "\n";
    switch (result->outcome) {
      case Outcome::kAllowed:
        return kExitOk;
      case Outcome::kDenied:
        return kExitRefused;
      case Outcome::kUnavailable:
        return kExitStoreUnavailable;
    }
    return kExitFailure;
  }

 private:
  // A one-shot check reports a failing store instead of applying failure modes (no local store).
  static std::shared_ptr<const PolicySet> StrictCopy(const Config& config) {
    std::vector<PolicySpec> specs;
    for (const PolicySet::Policy& p : config.policies->policies()) {
      PolicySpec s = p.spec;
      s.on_failure = FailureMode::kDeny;
      specs.push_back(std::move(s));
    }
    auto set = PolicySet::Create(std::move(specs), config.policies->options());
    return set.ok() ? *set : config.policies;
  }

  static int Unavailable(Env& env, const Status& s) {
    const http_api::Reply reply =
        http_api::ErrorReply({.status = 503, .code = "store_unavailable", .message = s.ToString()});
    env.out << reply.body << "\n";
    env.err << "caudal check: store unavailable: " << s.ToString() << "\n";
    return kExitStoreUnavailable;
  }

  std::string config_;
  Overrides flags_;  // --store alone
  std::vector<std::string> descriptors_;
  std::optional<int64_t> cost_;
};

}  // namespace

CAUDAL_REGISTER_COMMAND(CheckCommand, "check",
                        "Make one decision against a config and print it as JSON");

}  // namespace caudal::cli

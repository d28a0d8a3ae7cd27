// `caudal validate --config FILE`: checks a config the way `caudal serve` would, without serving.
#include <string>

#include "caudal/config.h"
#include "cli/command.h"
#include "common/redact.h"
#include "server/tls_context.h"

namespace caudal::cli {
namespace {

class ValidateCommand final : public Command {
 public:
  void AddOptions(CLI::App& app) override {
    app.add_option("--config", config_, "the YAML config file to check")
        ->type_name("FILE")
        ->required();
  }

  int Run(Env& env) override {
    auto config = LoadConfigFile(config_);
    if (!config.ok()) {
      env.err << "caudal validate: " << config.status().message() << "\n";
      return kExitUsage;
    }
    // The files serve would read: a certificate that does not load is caught here, not at start.
    Status files = LoadCallerToken(*config);
    if (files.ok() && config->server.tls.enabled()) {
      auto tls = server_tls::MakeServerContext(config->server.tls);
      if (!tls.ok()) files = tls.status();
    }
    if (!files.ok()) {
      env.err << "caudal validate: " << config_ << ": " << files.message() << "\n";
      return kExitUsage;
    }
    std::string names;
    for (const PolicySet::Policy& p : config->policies->policies()) {
      names += (names.empty() ? "" : ", ") + p.spec.name;
    }
    env.out << config_ << ": valid (" << config->policies->policies().size() << " policies"
            << (names.empty() ? "" : ": " + names) << "; store " << RedactUrl(config->store.url)
            << ", on_failure " << FailureModeName(config->store.on_failure) << ")\n";
    return kExitOk;
  }

 private:
  std::string config_;
};

}  // namespace

CAUDAL_REGISTER_COMMAND(ValidateCommand, "validate", "Check a config file without serving");

}  // namespace caudal::cli

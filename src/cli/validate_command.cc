// `caudal validate --config FILE`: checks a config the way `caudal serve` would, without serving:
// the file, then every file it names (the caller token, certificates, Envoy's files). With
// `--against RUNNING`, also says which of its changes a running `caudal serve` of RUNNING would
// take only on restart.
#include <CLI/CLI.hpp>
#include <string>

#include "caudal/config/config.h"
#include "cli/command.h"
#include "common/redact.h"
#include "service/service.h"

namespace caudal::cli {
namespace {

class ValidateCommand final : public Command {
 public:
  void AddOptions(CLI::App& app) override {
    app.add_option("--config", config_, "the YAML config file to check")
        ->type_name("FILE")
        ->envname("CAUDAL_CONFIG")
        ->required();
    app.add_option("--against", against_,
                   "the config a running caudal serves: list the changes a reload would not "
                   "take until a restart")
        ->type_name("FILE");
  }

  int Run(Env& env) override {
    auto config = LoadConfigFile(config_);
    if (!config.ok()) {
      env.err << "caudal validate: " << config.status().message() << "\n";
      return kExitUsage;
    }
    if (Status s = Service::Check(*config); !s.ok()) {
      env.err << "caudal validate: " << config_ << ": " << s.message() << "\n";
      return kExitUsage;
    }
    std::string names;
    for (const PolicySet::Policy& p : config->policies->policies()) {
      names += (names.empty() ? "" : ", ") + p.spec.name;
    }
    env.out << config_ << ": valid (" << config->policies->policies().size() << " policies"
            << (names.empty() ? "" : ": " + names) << "; store " << RedactUrl(config->store.url)
            << ", on_failure " << FailureModeName(config->store.on_failure) << ")\n";
    if (against_.empty()) return kExitOk;
    auto running = LoadConfigFile(against_);
    if (!running.ok()) {
      env.err << "caudal validate: --against: " << running.status().message() << "\n";
      return kExitUsage;
    }
    for (const std::string& field : Service::RestartOnlyChanges(*running, *config)) {
      env.out << "restart needed for " << field << "\n";
    }
    return kExitOk;
  }

 private:
  std::string config_;
  std::string against_;
};

}  // namespace

CAUDAL_REGISTER_COMMAND(ValidateCommand, "validate", "Check a config file without serving");

}  // namespace caudal::cli

// The security sections of caudal's config: server.tls, server.auth and store.tls (see
// docs/configuration.md). Parsed here rather than in config.cc so that each stays one concern.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

#include "caudal/config/config.h"
#include "config/field_table.h"
#include "config/field_values.h"
#include "config/yaml_reader.h"

namespace caudal::config_internal {

// The tables of server.tls, server.auth and store.tls (see field_table.h).
const Table<ServerTlsConfig>& ServerTlsTable();
const Table<CallerAuthConfig>& CallerAuthTable();
const Table<StoreTlsConfig>& StoreTlsTable();

// The checks across sections, once the whole server section is read: an identity allow-list
// needs client certificates to read identities from. `at` locates the error.
Status CheckServerSecurity(const YamlReader& r, const YAML::Node& at, const ServerConfig& server);

// Makes every relative path of the security sections relative to `dir` (ending in '/').
void ResolveSecurityPaths(Config& config, const std::string& dir);

}  // namespace caudal::config_internal

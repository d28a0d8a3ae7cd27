// Reading envoyproxy/ratelimit's YAML into RateLimitConfig, through the YamlReader that caudal's
// own config file uses, so both formats report errors alike. yaml-cpp reports malformed YAML by
// throwing; the exceptions are caught here, at the boundary, and become Status values.
#include "config/ratelimit_config_yaml.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "common/cat.h"
#include "common/utf8.h"
#include "config/envoy_yaml_reader.h"
#include "config/yaml_reader.h"

namespace caudal::envoy {
namespace {

using config_internal::EnvoyReader;
using config_internal::YamlReader;

// A file, its size and its descriptors are bounded (EnvoyReader bounds the descriptors).
constexpr size_t kMaxFiles = 10'000;
constexpr std::uintmax_t kMaxFileBytes = 16 << 20;

struct DomainTree {
  std::shared_ptr<DescriptorNode> root;
  std::string file;  // where it was first defined
};

Status ReadDocument(const RateLimitDocument& doc, const RateLimitLoadOptions& options,
                    std::map<std::string, DomainTree>& domains) {
  EnvoyReader reader(doc.name);
  const YamlReader& r = reader.r();
  if (doc.text.size() > kMaxFileBytes) {
    return Status::InvalidArgument(Cat(doc.name, ": larger than 16 MiB"));
  }
  if (const size_t bad = FirstInvalidUtf8(doc.text); bad != doc.text.size()) {
    const std::string_view before = std::string_view(doc.text).substr(0, bad);
    const size_t line = static_cast<size_t>(std::count(before.begin(), before.end(), '\n'));
    const size_t line_start =
        before.rfind('\n') == std::string_view::npos ? 0 : before.rfind('\n') + 1;
    YAML::Mark mark;
    mark.line = static_cast<int>(line);
    mark.column = static_cast<int>(bad - line_start);
    return r.ErrorAt(mark, "", "not valid UTF-8 (YAML text must be)");
  }
  YAML::Node loaded;
  try {
    loaded = YAML::Load(doc.text);
  } catch (const YAML::Exception& e) {
    return r.ErrorAt(e.mark, "", Cat("malformed YAML: ", e.msg));
  }
  const YAML::Node& root = loaded;  // const: reading a missing field must not add it
  if (root.IsNull()) return r.Error(root, "domain", "config file cannot have empty domain");
  config_internal::EnvoyDocument fields;
  if (Status s = config_internal::EnvoyDocumentTable().Read(r, root, "", fields); !s.ok()) return s;
  const std::string& domain = fields.domain;
  if (domain.empty()) {
    return r.Error(root["domain"] ? root["domain"] : root, "domain",
                   "config file cannot have empty domain");
  }
  auto [it, fresh] = domains.try_emplace(domain);
  if (fresh) {
    it->second = {.root = std::make_shared<DescriptorNode>(), .file = doc.name};
  } else if (!options.merge_domains) {
    return r.Error(root["domain"], "domain",
                   Cat("duplicate domain '", domain, "' in config file (already defined in ",
                       it->second.file, ')'));
  }
  return reader.Descriptors(fields.descriptors, *it->second.root, "descriptors", Cat(domain, '.'),
                            1);
}

Result<std::string> ReadFile(const std::filesystem::path& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return Status::InvalidArgument(path.string() + ": cannot read: " + ec.message());
  if (size > kMaxFileBytes) return Status::InvalidArgument(path.string() + ": larger than 16 MiB");
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) return Status::InvalidArgument(path.string() + ": cannot read");
  return text.str();
}

}  // namespace

Result<RateLimitConfig> ParseRateLimitConfig(std::span<const RateLimitDocument> documents,
                                             const RateLimitLoadOptions& options) {
  std::map<std::string, DomainTree> domains;
  for (const RateLimitDocument& doc : documents) {
    try {
      if (Status s = ReadDocument(doc, options, domains); !s.ok()) return s;
    } catch (const YAML::Exception& e) {
      // yaml-cpp throws on a few shapes the checks above should already refuse.
      return YamlReader(doc.name).ErrorAt(e.mark, "", Cat("unexpected YAML shape: ", e.msg));
    }
  }
  RateLimitConfig config;
  for (auto& [domain, tree] : domains) {
    if (Status s = config.AddDomain(domain, std::move(tree.root)); !s.ok()) return s;
  }
  return config;
}

Result<RateLimitConfig> ParseRateLimitConfigText(std::string_view text, std::string name,
                                                 const RateLimitLoadOptions& options) {
  const RateLimitDocument doc{.name = std::move(name), .text = std::string(text)};
  return ParseRateLimitConfig(std::span<const RateLimitDocument>(&doc, 1), options);
}

Result<RateLimitConfig> LoadRateLimitConfig(const std::string& path,
                                            const RateLimitLoadOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<RateLimitDocument> docs;
  if (fs::is_directory(path, ec)) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(path, ec)) {
      const auto ext = e.path().extension();
      if (e.is_regular_file() && (ext == ".yaml" || ext == ".yml")) files.push_back(e.path());
      if (files.size() > kMaxFiles) {
        return Status::InvalidArgument(Cat(path, ": more than ", kMaxFiles, " files"));
      }
    }
    if (ec) return Status::InvalidArgument(path + ": cannot list: " + ec.message());
    std::sort(files.begin(), files.end());
    if (files.empty()) return Status::InvalidArgument(path + ": no .yaml or .yml files");
    for (const auto& f : files) {
      auto text = ReadFile(f);
      if (!text.ok()) return text.status();
      docs.push_back({.name = f.string(), .text = std::move(*text)});
    }
  } else {
    auto text = ReadFile(path);
    if (!text.ok()) return text.status();
    docs.push_back({.name = path, .text = std::move(*text)});
  }
  return ParseRateLimitConfig(docs, options);
}

}  // namespace caudal::envoy

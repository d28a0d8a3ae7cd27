// The configuration references in docs/ are generated from the field tables (field_table.h): a
// markdown table per section (path, type, default, what), between the lines
//   <!-- NAME:begin ... -->   and   <!-- NAME:end -->
// The config_reference tool rewrites those sections; the docs.config_reference test fails when a
// doc and the tables disagree.
//
// Thread-safety: pure functions.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "caudal/common/status.h"
#include "config/field_table.h"

namespace caudal::config_internal {

// The sections `walk` visits, as markdown; headings are `###`.
std::string RenderReference(const std::function<void(FieldVisitor&)>& walk);

struct GeneratedSection {
  std::string_view name;  // the markers' NAME
  std::string text;
};
// "config-reference" (docs/configuration.md: caudal's config file) and "envoy-reference"
// (docs/envoy.md: envoyproxy/ratelimit's files, as caudal reads them).
std::vector<GeneratedSection> GeneratedSections();

// `doc` with the lines between NAME's markers replaced by `text`; kNotFound when `doc` has no
// NAME markers, kInvalidArgument when they are not a begin line then an end line.
Result<std::string> ReplaceGenerated(std::string_view doc, std::string_view name,
                                     std::string_view text);

}  // namespace caudal::config_internal

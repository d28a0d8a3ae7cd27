#include "config/field_values.h"

namespace caudal::config_internal {

std::string OrList(std::span<const std::string> words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += i + 1 == words.size() ? " or " : ", ";
    out += words[i];
  }
  return out;
}

Status NonEmptyPath(std::string_view text) {
  return text.empty() ? Status::InvalidArgument("empty path") : Status::Ok();
}

Item<std::string> TextItem(std::string_view what, Status (*check)(std::string_view)) {
  return {.shape = {.kind = Shape::Kind::kText, .what = std::string(what)},
          .read = [check](const YamlReader& r, const YAML::Node& n,
                          const std::string& path) -> Result<std::string> {
            auto text = r.String(n, path);
            if (!text.ok()) return text.status();
            if (check != nullptr) {
              if (Status s = check(*text); !s.ok()) return r.Error(n, path, s.message());
            }
            return text;
          },
          .show = [](const std::string& s) { return s; }};
}

}  // namespace caudal::config_internal

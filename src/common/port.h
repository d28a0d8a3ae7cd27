// A TCP port written in decimal: the one parser for listen addresses, Redis URLs and the
// addresses Redis itself reports (CLUSTER SLOTS, SENTINEL GET-MASTER-ADDR-BY-NAME).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace caudal {

// `text` as a port from `min` to 65535: digits only, no sign, no spaces. Listeners pass min 0,
// "any free port"; addresses to connect to, 1.
std::optional<uint16_t> ParsePort(std::string_view text, uint16_t min = 1);

}  // namespace caudal

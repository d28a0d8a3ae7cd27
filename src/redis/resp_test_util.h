// RESP for the redis layer's unit tests: what a server would send, and a reply as the store's own
// parser reads it. Test code only.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>

#include "common/cat.h"
#include "redis/resp.h"

namespace caudal::redis::testing {

// `s` as a bulk string.
inline std::string Bulk(std::string_view s) { return Cat('$', s.size(), "\r\n", s, "\r\n"); }

// The reply `resp` holds; an empty Reply, and a failed expectation, when it holds no whole one.
inline Reply Parse(const std::string& resp) {
  ReplyParser parser;
  parser.Feed(resp.data(), resp.size());
  Result<std::optional<Reply>> r = parser.Next();
  EXPECT_TRUE(r.ok() && r->has_value()) << resp;
  return r.ok() && r->has_value() ? std::move(**r) : Reply();
}

}  // namespace caudal::redis::testing

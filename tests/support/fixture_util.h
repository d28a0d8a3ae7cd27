// What the multi-server fixtures (RedisCluster, RedisSentinels) share: text helpers for the
// replies RedisServer::Command flattens, and the wait for servers to converge.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "caudal/common/status.h"

namespace caudal::testing {

// Concatenates, appending (GCC 12's -Wrestrict misfires on "literal" + std::string chains).
std::string Join(std::initializer_list<std::string_view> parts);
// "127.0.0.1:<port>".
std::string Loopback(uint16_t port);
// The lines of `s`, each without a trailing '\r'.
std::vector<std::string> Lines(const std::string& s);

// Asks `problem` every 50 ms until it answers "" (the servers agree) or `timeout` has passed;
// then kUnavailable "<what> within <timeout>ms: <its last answer>". Polling for servers to
// converge: no decision depends on this time.
Status WaitConverged(std::chrono::milliseconds timeout, std::string_view what,
                     const std::function<std::string()>& problem);

}  // namespace caudal::testing

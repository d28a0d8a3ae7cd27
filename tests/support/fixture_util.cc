#include "support/fixture_util.h"

#include <sstream>
#include <thread>

namespace caudal::testing {

std::string Join(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view p : parts) out.append(p);
  return out;
}

std::string Loopback(uint16_t port) { return Join({"127.0.0.1:", std::to_string(port)}); }

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out.push_back(line);
  }
  return out;
}

Status WaitConverged(std::chrono::milliseconds timeout, std::string_view what,
                     const std::function<std::string()>& problem) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  std::string why = "not asked yet";
  while (std::chrono::steady_clock::now() < until) {
    why = problem();
    if (why.empty()) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Status::Unavailable(
      Join({what, " within ", std::to_string(timeout.count()), "ms: ", why}));
}

}  // namespace caudal::testing

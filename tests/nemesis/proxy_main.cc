// caudal-nemesis-proxy: the delay proxy (tests/support/delay_proxy.h) as a process, for the
// nemesis harness (tests/nemesis/nemesis.py): as many proxies as it is told to open, each
// switched by a command on stdin. One command per line, one answer line per command on stdout:
//
//   open <target port>              → "<id> <port>"   a proxy to 127.0.0.1:<target port>
//   hold <id>...                    → "ok"            stops forwarding, keeps the connections
//   drop <id>...                    → "ok"            closes them, refuses new ones
//   heal <id>...                    → "ok"            undoes hold or drop
//   delay <ms> <id>...              → "ok"            one-way delay of each direction from now on
//
// A bad command is answered "error: …" and changes nothing. It exits when stdin closes.
#include <cstdint>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "support/delay_proxy.h"

namespace {

using caudal::testing::DelayProxy;

// The proxies the rest of the line names, or an error naming the first bad id.
std::string Targets(std::istringstream& in, const std::vector<std::unique_ptr<DelayProxy>>& all,
                    std::vector<DelayProxy*>& out) {
  std::string word;
  while (in >> word) {
    size_t used = 0;
    unsigned long id = 0;
    try {
      id = std::stoul(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size() || id >= all.size()) return "error: no proxy " + word;
    out.push_back(all[id].get());
  }
  if (out.empty()) return "error: no proxy named";
  return "";
}

std::string Answer(const std::string& line, std::vector<std::unique_ptr<DelayProxy>>& all) {
  std::istringstream in(line);
  std::string verb;
  in >> verb;
  if (verb == "open") {
    long port = 0;
    if (!(in >> port) || port <= 0 || port > 65535) return "error: open <target port>";
    auto proxy =
        DelayProxy::Start({.target_port = static_cast<uint16_t>(port), .max_connections = 1024});
    if (!proxy.ok()) return "error: " + proxy.status().ToString();
    all.push_back(std::move(*proxy));
    return std::to_string(all.size() - 1) + " " + std::to_string(all.back()->port());
  }
  long ms = 0;
  if (verb == "delay" && (!(in >> ms) || ms < 0 || ms > 60000)) {
    return "error: delay <ms, 0 to 60000> <id>...";
  }
  std::vector<DelayProxy*> targets;
  if (verb != "hold" && verb != "drop" && verb != "heal" && verb != "delay") {
    return "error: unknown command " + verb;
  }
  if (std::string bad = Targets(in, all, targets); !bad.empty()) return bad;
  for (DelayProxy* p : targets) {
    if (verb == "hold") p->Hold();
    if (verb == "drop") p->Drop();
    if (verb == "heal") p->Heal();
    if (verb == "delay") {
      (void)p->SetDelay(std::chrono::milliseconds(ms), std::chrono::milliseconds(ms));
    }
  }
  return "ok";
}

}  // namespace

int main() {
  std::vector<std::unique_ptr<DelayProxy>> proxies;
  std::string line;
  while (std::getline(std::cin, line)) std::cout << Answer(line, proxies) << std::endl;
  return 0;
}

#include "server/connection_limits.h"

#include <dirent.h>
#include <sys/resource.h>

#include <algorithm>

namespace caudal::http_server {

FileLimit RaiseFileLimit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return {};
  if (r.rlim_cur < r.rlim_max) {
    rlimit raised = r;
    raised.rlim_cur = r.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) r = raised;
  }
  const auto value = [](rlim_t v) {
    return v == RLIM_INFINITY ? INT64_MAX : static_cast<int64_t>(std::min<rlim_t>(v, INT64_MAX));
  };
  return {.soft = value(r.rlim_cur), .hard = value(r.rlim_max)};
}

int64_t OpenDescriptors() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int64_t n = 0;
  while (const dirent* e = readdir(dir)) n += e->d_name[0] != '.';
  closedir(dir);
  return n - 1;  // the directory's own descriptor
}

int64_t ConnectionBudget(int64_t wanted, int64_t soft_limit, int64_t open) {
  const int64_t room = soft_limit - std::max<int64_t>(open, 0) - kReservedDescriptors;
  return std::max<int64_t>(1, std::min(wanted, room));
}

size_t ClientConnections::Hash::operator()(const IpAddress& a) const {
  // FNV-1a over the family and the bytes: the masked address of a client.
  uint64_t h = 0xcbf29ce484222325ULL ^ static_cast<uint64_t>(a.family);
  for (uint8_t b : a.bytes) h = (h ^ b) * 0x100000001b3ULL;
  return static_cast<size_t>(h);
}

ClientConnections::Admission ClientConnections::Admit(const IpAddress& peer) {
  const IpAddress group = Group(peer);
  std::lock_guard<std::mutex> lock(mu_);
  Held& held = held_[group];
  if (held.connections < per_client_) {
    ++held.connections;
    return Admission::kAdmitted;
  }
  if (held.refusing) return Admission::kRefused;
  held.refusing = true;
  return Admission::kRefusedFirst;
}

void ClientConnections::Release(const IpAddress& peer) {
  const IpAddress group = Group(peer);
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = held_.find(group);
  if (it == held_.end()) return;
  // The table holds only clients with connections: at most max_connections entries. A client
  // refused again after it left entirely is logged again; one cycling a connection is not.
  if (--it->second.connections <= 0) held_.erase(it);
}

size_t ClientConnections::clients() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_.size();
}

}  // namespace caudal::http_server

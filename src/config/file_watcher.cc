#include "config/file_watcher.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "common/cat.h"

namespace caudal {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxPaths = 16;
constexpr size_t kMaxWatches = 64;
constexpr size_t kMaxEntries = 4096;
constexpr uint64_t kMaxHashedBytes = uint64_t{64} << 20;
constexpr uint64_t kMaxHashedFile = uint64_t{16} << 20;

constexpr uint32_t kMask = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CLOSE_WRITE |
                           IN_MODIFY | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;

// FNV-1a, 64 bits: a change detector, not a defence against anyone.
class Hasher {
 public:
  void Add(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) {
      h_ ^= p[i];
      h_ *= 1099511628211ull;
    }
  }
  void Add(std::string_view s) {
    Add(s.data(), s.size());
    Add(uint64_t{s.size()});
  }
  void Add(uint64_t v) { Add(&v, sizeof v); }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 14695981039346656037ull;
};

// A file (or whatever `path` leads to): its identity, size and times, and its content while the
// budget lasts. A rewrite within one timestamp tick still changes the content.
void AddFile(Hasher& h, const fs::path& path, uint64_t& budget) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    h.Add("missing");
    return;
  }
  for (uint64_t v :
       {uint64_t(st.st_dev), uint64_t(st.st_ino), uint64_t(st.st_mode), uint64_t(st.st_size),
        uint64_t(st.st_mtim.tv_sec), uint64_t(st.st_mtim.tv_nsec), uint64_t(st.st_ctim.tv_sec),
        uint64_t(st.st_ctim.tv_nsec)}) {
    h.Add(v);
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (!S_ISREG(st.st_mode) || size > kMaxHashedFile || size > budget) return;
  budget -= size;
  std::ifstream in(path, std::ios::binary);
  char buf[64 * 1024];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    h.Add(buf, static_cast<size_t>(in.gcount()));
  }
}

// The first kMaxEntries names of a directory, sorted.
std::vector<std::string> Entries(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    names.push_back(it->path().filename().string());
    if (names.size() >= kMaxEntries) break;
  }
  std::sort(names.begin(), names.end());
  return names;
}

uint64_t Fingerprint(const std::vector<std::string>& paths) {
  Hasher h;
  uint64_t budget = kMaxHashedBytes;
  for (const std::string& p : paths) {
    h.Add(p);
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      h.Add("directory");
      for (const std::string& name : Entries(p)) {
        h.Add(name);
        AddFile(h, fs::path(p) / name, budget);
      }
    } else {
      AddFile(h, p, budget);
    }
  }
  return h.value();
}

// The directories whose events can mean a change to `paths`.
std::vector<std::string> DirectoriesToWatch(const std::vector<std::string>& paths) {
  std::set<std::string> dirs;
  const auto add = [&](const fs::path& dir) {
    std::error_code ec;
    if (dirs.size() < kMaxWatches && fs::is_directory(dir, ec)) dirs.insert(dir.string());
  };
  const auto add_target_dir = [&](const fs::path& link) {
    std::error_code ec;
    if (!fs::is_symlink(link, ec)) return;
    const fs::path target = fs::canonical(link, ec);
    if (!ec) add(target.parent_path());
  };
  for (const std::string& p : paths) {
    const fs::path path(p);
    add(path.parent_path());  // renames over the path, and Kubernetes' `..data` swap
    add_target_dir(path);
    std::error_code ec;
    if (!fs::is_directory(path, ec)) continue;
    add(path);
    const fs::path real = fs::canonical(path, ec);
    if (!ec) add(real);
    for (const std::string& name : Entries(path)) add_target_dir(path / name);
  }
  return {dirs.begin(), dirs.end()};
}

}  // namespace

Result<std::unique_ptr<FileWatcher>> FileWatcher::Start(std::vector<std::string> paths,
                                                        OnChange on_change, Options options) {
  if (options.clock == nullptr) return Status::InvalidArgument("file watcher: no clock");
  if (paths.empty()) return Status::InvalidArgument("file watcher: no path to watch");
  if (paths.size() > kMaxPaths) {
    return Status::InvalidArgument(Cat("file watcher: at most ", kMaxPaths, " paths"));
  }
  std::vector<std::string> absolute;
  for (const std::string& p : paths) {
    std::error_code ec;
    const fs::path a = fs::absolute(p, ec).lexically_normal();
    const fs::path dir = a.has_filename() ? a.parent_path() : a.parent_path().parent_path();
    if (ec || !fs::is_directory(dir, ec)) {
      return Status::InvalidArgument(Cat(p, ": its directory does not exist"));
    }
    std::string s = a.string();
    if (s.size() > 1 && s.back() == '/') s.pop_back();
    absolute.push_back(std::move(s));
  }
  std::unique_ptr<FileWatcher> w(
      new FileWatcher(std::move(absolute), std::move(on_change), std::move(options)));
  w->inotify_fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (w->inotify_fd_ < 0) {
    return Status::Unavailable(Cat("file watcher: inotify: ", std::strerror(errno)));
  }
  w->stop_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (w->stop_fd_ < 0) {
    return Status::Unavailable(Cat("file watcher: eventfd: ", std::strerror(errno)));
  }
  w->RenewWatches();
  if (w->watches_.empty()) {
    return Status::Unavailable(
        Cat("file watcher: cannot watch ", w->paths_.front(), ": ", std::strerror(errno)));
  }
  w->fingerprint_ = Fingerprint(w->paths_);
  w->thread_ = std::thread([raw = w.get()] { raw->Run(); });
  return w;
}

FileWatcher::FileWatcher(std::vector<std::string> paths, OnChange on_change, Options options)
    : paths_(std::move(paths)), on_change_(std::move(on_change)), options_(std::move(options)) {}

FileWatcher::~FileWatcher() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(stop_fd_, &one, sizeof one);
    thread_.join();
  }
  if (inotify_fd_ >= 0) ::close(inotify_fd_);
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

FileWatcher::Counters FileWatcher::counters() const {
  return {.events = events_.load(),
          .checks = checks_.load(),
          .unsettled = unsettled_.load(),
          .changes = changes_.load()};
}

void FileWatcher::Run() {
  const Clock& clock = *options_.clock;
  constexpr Nanos kNever = Nanos::max();
  const Nanos debounce = options_.debounce, max_delay = options_.max_delay;
  const Nanos settle = options_.settle, rescan = options_.rescan_interval;
  bool burst = false;       // events seen, not compared yet
  Nanos first{0}, last{0};  // of the current burst
  Nanos next_rescan = clock.Monotonic() + rescan;
  while (true) {
    const Nanos now = clock.Monotonic();
    Nanos due = kNever;
    if (burst) due = std::min(last + debounce, first + max_delay);
    if (rescan.count() > 0) due = std::min(due, next_rescan);
    if (candidate_) due = std::min(due, candidate_->second + settle);
    int timeout = -1;
    if (due != kNever) {
      const auto ms = std::chrono::ceil<std::chrono::milliseconds>(due - now).count();
      timeout = static_cast<int>(std::clamp<int64_t>(ms, 0, 60'000));
    }
    pollfd fds[2] = {{.fd = inotify_fd_, .events = POLLIN, .revents = 0},
                     {.fd = stop_fd_, .events = POLLIN, .revents = 0}};
    const int n = ::poll(fds, 2, timeout);
    if (n < 0 && errno != EINTR) return;
    if (n > 0 && fds[1].revents != 0) return;
    if (n > 0 && fds[0].revents != 0) {
      if (!ReadEvents()) return;
      last = clock.Monotonic();
      if (!burst) first = last;
      burst = true;
    }
    const Nanos after = clock.Monotonic();
    const bool burst_over = burst && (after >= last + debounce || after >= first + max_delay);
    const bool rescan_due = rescan.count() > 0 && after >= next_rescan;
    // A candidate is read again once it is due, events or not: stability is judged by what the
    // files hold, so a stream of events beside them delays nothing.
    const bool settle_due = candidate_ && after >= candidate_->second + settle;
    if (burst_over || rescan_due || settle_due) {
      burst = false;
      next_rescan = after + rescan;
      Check(after);
    }
  }
}

bool FileWatcher::ReadEvents() {
  alignas(inotify_event) char buf[16 * 1024];
  while (true) {
    const ssize_t n = ::read(inotify_fd_, buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    // Every event (IN_Q_OVERFLOW too) only says "compare again"; which file it names is not
    // needed.
    for (ssize_t at = 0; at < n;) {
      const auto* e = reinterpret_cast<const inotify_event*>(buf + at);
      events_.fetch_add(1, std::memory_order_relaxed);
      at += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
    }
  }
}

void FileWatcher::Check(Nanos now) {
  const uint64_t read = Fingerprint(paths_);
  // Watch what the paths lead to now (a new `..data` target, a directory created again) before
  // the callback, so a change during it is seen.
  RenewWatches();
  checks_.fetch_add(1, std::memory_order_relaxed);
  bool changed = false;
  if (read == fingerprint_) {
    candidate_.reset();  // back to what was reported: nothing to report
  } else if (candidate_ && candidate_->first == read &&
             now >= candidate_->second + options_.settle) {
    changed = true;  // the same for `settle`: not a writer between two writes
  } else {
    if (!candidate_ || candidate_->first != read) candidate_.emplace(read, now);
    unsettled_.fetch_add(1, std::memory_order_relaxed);
  }
  if (options_.on_check) options_.on_check(changed);
  if (!changed) return;
  fingerprint_ = read;
  candidate_.reset();
  changes_.fetch_add(1, std::memory_order_relaxed);
  on_change_();
}

void FileWatcher::RenewWatches() {
  std::vector<std::pair<int, std::string>> renewed;
  for (const std::string& dir : DirectoriesToWatch(paths_)) {
    const int wd = ::inotify_add_watch(inotify_fd_, dir.c_str(), kMask);
    if (wd < 0) continue;  // gone meanwhile: the next check renews again
    const bool seen =
        std::any_of(renewed.begin(), renewed.end(), [&](const auto& w) { return w.first == wd; });
    if (!seen) renewed.emplace_back(wd, dir);
  }
  for (const auto& watch : watches_) {
    const int wd = watch.first;
    const bool kept =
        std::any_of(renewed.begin(), renewed.end(), [wd](const auto& w) { return w.first == wd; });
    // A directory that is gone has lost its watch already; removing it again fails harmlessly.
    if (!kept) ::inotify_rm_watch(inotify_fd_, wd);
  }
  watches_ = std::move(renewed);
}

}  // namespace caudal

// FileWatcher: calls back when configuration files or directories change, so a service reloads
// them without a signal. It sees
//   - a file rewritten in place (even to the same size within one timestamp tick),
//   - a file replaced by a rename over it (how editors and `kubectl cp` write),
//   - files added to, removed from or renamed in a watched directory,
//   - the atomic swap with which Kubernetes updates a ConfigMap volume: the files are links
//     through `..data`, and `..data` is renamed to point at a new timestamped directory,
//   - a watched directory deleted and created again (the watches are renewed).
//
// How: inotify watches the directories that hold what is watched (a watched directory itself,
// the directory of a watched file, and those of the files symbolic links lead to). An event only
// says that something may have changed: after `debounce` without a further event (or
// `max_delay` after the first one, under a steady stream) the watcher reads a fingerprint of
// the watched paths (each file's identity, size, times and a hash of its content; a directory's
// entries). A burst of writes is one call; a change to an unrelated file beside a watched one is
// none.
//
// A changed file is reported only once it is stable: the fingerprint that differs from the last
// one reported must be read again, unchanged, at least `settle` later (whatever events came
// meanwhile). A file rewritten in place (truncated, then written in pieces) is thus never
// reported half-written unless its writer pauses for `settle` or longer between two writes:
// writers should still replace files atomically (write a temporary file, rename it over), which
// the watcher reports after `debounce` + `settle`.
//
// Usage (the serve command):
//   auto watcher = FileWatcher::Start({"/etc/ratelimit"}, [&] { Reload(); }, {.clock = &clock});
//   then load the configuration: a change after Start is never missed.
//
// Threading: one thread per watcher, on which `on_change` runs, one call at a time; it may take
// as long as it needs (events meanwhile make one more call), but it must not destroy the
// watcher. Nothing here blocks a caller of the service: the reload it triggers is the caller's
// to make atomic (build the new config, then swap it in). The destructor stops the thread; once
// it returns, `on_change` is not running and will not run.
//
// Bounds: at most 16 paths and 64 watched directories; a directory's first 4096 entries and
// 64 MiB of file content per comparison (beyond that, sizes and times alone).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "caudal/common/clock.h"
#include "caudal/common/status.h"

namespace caudal {

class FileWatcher {
 public:
  using OnChange = std::function<void()>;

  struct Options {
    // Required (Start refuses a null one): measures the debounce, settle, max_delay and rescan
    // intervals (its Monotonic()). The waits themselves are poll() timeouts, so a manual clock
    // only shifts when an interval counts as over.
    const Clock* clock = nullptr;
    // Quiet time after the last event before the paths are compared.
    std::chrono::milliseconds debounce{200};
    // How long a changed fingerprint must stay the same before on_change (see above).
    std::chrono::milliseconds settle{200};
    // The longest a comparison waits after the first event of a burst.
    std::chrono::milliseconds max_delay{2000};
    // Also compare this often without any event (0: never): for file systems inotify does not
    // see into (NFS, some FUSE mounts).
    std::chrono::milliseconds rescan_interval{0};
    // Called on the watcher's thread after every comparison, with whether it found a settled
    // change (before on_change, if it did). For tests and metrics; may be empty.
    std::function<void(bool changed)> on_check = nullptr;
  };

  // What the watcher did so far (for tests and metrics).
  struct Counters {
    uint64_t events = 0;     // inotify events read
    uint64_t checks = 0;     // comparisons of the fingerprint
    uint64_t unsettled = 0;  // comparisons that found a change not yet stable for `settle`
    uint64_t changes = 0;    // calls to on_change
  };

  // Watches `paths` (files or directories; a file may be missing while its directory exists)
  // and calls `on_change` after each settled change. kInvalidArgument for no clock, no paths,
  // more than 16, or a path whose directory does not exist; kUnavailable when inotify cannot be
  // set up (the per-user instance limit, say).
  static Result<std::unique_ptr<FileWatcher>> Start(std::vector<std::string> paths,
                                                    OnChange on_change, Options options);
  ~FileWatcher();

  FileWatcher(const FileWatcher&) = delete;
  FileWatcher& operator=(const FileWatcher&) = delete;

  Counters counters() const;

 private:
  FileWatcher(std::vector<std::string> paths, OnChange on_change, Options options);
  void Run();
  bool ReadEvents();  // false when the inotify descriptor failed
  // Compares, calls on_change on a settled difference, renews the watches.
  void Check(Nanos now);
  void RenewWatches();

  const std::vector<std::string> paths_;  // absolute
  const OnChange on_change_;
  const Options options_;
  int inotify_fd_ = -1;
  int stop_fd_ = -1;                                  // an eventfd: the destructor's wake-up call
  std::vector<std::pair<int, std::string>> watches_;  // watch descriptor, directory
  uint64_t fingerprint_ = 0;                          // the one last reported (or found at Start)
  // A fingerprint that differs from fingerprint_, and when it was first read (Monotonic()).
  std::optional<std::pair<uint64_t, Nanos>> candidate_;
  std::atomic<uint64_t> events_{0}, checks_{0}, unsettled_{0}, changes_{0};
  std::thread thread_;
};

}  // namespace caudal

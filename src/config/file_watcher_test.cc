// FileWatcher on real directories: every way a configuration changes on disk, Kubernetes'
// ConfigMap swap included. The tests wait for the watcher's own callbacks (bounded), never sleep.
// Most run on the system clock (what they test is which events inotify delivers); the torn-write
// tests run on a manual clock, so that when a read counts as settled is the test's to say.
#include "config/file_watcher.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "support/manual_clock.h"

namespace caudal {
namespace {

namespace fs = std::filesystem;
constexpr auto kPatience = std::chrono::seconds(10);

class TempDir {
 public:
  TempDir()
      : path_(fs::temp_directory_path() /
              ("caudal-watch-" + std::to_string(::getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  fs::path operator/(const std::string& name) const { return path_ / name; }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void Write(const fs::path& p, std::string_view text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
}

std::string Read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Records the watcher's comparisons and calls (with what the watched file held at each call);
// tests wait on them, bounded.
class Recorder {
 public:
  explicit Recorder(fs::path read_on_change = {}, const Clock* clock = &SystemClock::Instance())
      : file_(std::move(read_on_change)), clock_(clock) {}

  FileWatcher::Options Options() {
    return {.clock = clock_,
            .debounce = std::chrono::milliseconds(20),
            .settle = std::chrono::milliseconds(20),
            .max_delay = std::chrono::milliseconds(500),
            .on_check = [this](bool changed) {
              std::lock_guard lock(mu_);
              checks_.push_back(changed);
              cv_.notify_all();
            }};
  }
  FileWatcher::OnChange OnChange() {
    return [this] {
      const std::string text = file_.empty() ? "" : Read(file_);
      std::lock_guard lock(mu_);
      ++changes_;
      seen_ = text;
      all_seen_.push_back(text);
      cv_.notify_all();
    };
  }
  bool WaitForChanges(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kPatience, [&] { return changes_ >= n; });
  }
  bool WaitToSee(std::string_view text) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kPatience, [&] { return seen_ == text; });
  }
  bool WaitForChecks(size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kPatience, [&] { return checks_.size() >= n; });
  }
  size_t checks() {
    std::lock_guard lock(mu_);
    return checks_.size();
  }
  bool AnyCheckChanged() {
    std::lock_guard lock(mu_);
    return std::find(checks_.begin(), checks_.end(), true) != checks_.end();
  }
  int changes() {
    std::lock_guard lock(mu_);
    return changes_;
  }
  std::string seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }
  std::vector<std::string> all_seen() {
    std::lock_guard lock(mu_);
    return all_seen_;
  }
  // Waits (briefly, bounded) for a comparison or a call; false when none came.
  bool WaitForAnything(std::chrono::milliseconds patience) {
    std::unique_lock lock(mu_);
    const size_t checks = checks_.size();
    return cv_.wait_for(lock, patience, [&] { return checks_.size() != checks; });
  }

 private:
  const fs::path file_;
  const Clock* const clock_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<bool> checks_;
  int changes_ = 0;
  std::string seen_;
  std::vector<std::string> all_seen_;
};

std::unique_ptr<FileWatcher> Watch(std::vector<std::string> paths, Recorder& r) {
  auto w = FileWatcher::Start(std::move(paths), r.OnChange(), r.Options());
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  return w.ok() ? std::move(*w) : nullptr;
}

TEST(FileWatcher, SeesARewriteInPlaceEvenOfTheSameSize) {
  TempDir dir;
  Write(dir / "a.yaml", "domain: a\n");
  Recorder r;
  auto w = Watch({(dir / "a.yaml").string()}, r);
  Write(dir / "a.yaml", "domain: b\n");
  ASSERT_TRUE(r.WaitForChanges(1));
  Write(dir / "a.yaml", "domain: c\n");
  ASSERT_TRUE(r.WaitForChanges(2));
  EXPECT_GE(w->counters().events, 2u);
}

TEST(FileWatcher, SeesARenameOverTheFile) {
  TempDir dir;
  Write(dir / "a.yaml", "domain: a\n");
  Recorder r(dir / "a.yaml");
  auto w = Watch({(dir / "a.yaml").string()}, r);
  Write(dir / "a.yaml.tmp", "domain: renamed\n");
  fs::rename(dir / "a.yaml.tmp", dir / "a.yaml");
  ASSERT_TRUE(r.WaitForChanges(1));
  EXPECT_EQ(r.seen(), "domain: renamed\n");
}

// Kubernetes mounts a ConfigMap as links: file -> ..data/file, ..data -> ..<timestamp>/. An
// update writes a new timestamped directory, points ..data_tmp at it and renames ..data_tmp over
// ..data (one atomic step), then removes the old directory.
class ConfigMapVolume {
 public:
  explicit ConfigMapVolume(const fs::path& root) : root_(root) {
    Publish("domain: v1\n");
    fs::create_symlink("..data/ratelimit.yaml", root_ / "ratelimit.yaml");
  }
  void Publish(std::string_view text) {
    const std::string version = "..2024_01_01_00_00_0" + std::to_string(++version_);
    fs::create_directory(root_ / version);
    Write(root_ / version / "ratelimit.yaml", text);
    fs::create_directory_symlink(version, root_ / "..data_tmp");
    fs::rename(root_ / "..data_tmp", root_ / "..data");
    if (!current_.empty()) fs::remove_all(root_ / current_);
    current_ = version;
  }

 private:
  fs::path root_;
  std::string current_;
  int version_ = 0;
};

TEST(FileWatcher, SeesKubernetesConfigMapSwapsWatchingTheDirectory) {
  TempDir dir;
  ConfigMapVolume volume(dir.path());
  Recorder r(dir / "ratelimit.yaml");
  auto w = Watch({dir.path().string()}, r);
  volume.Publish("domain: v2\n");
  ASSERT_TRUE(r.WaitToSee("domain: v2\n"));
  volume.Publish("domain: v3\n");  // the watches follow the new directory
  ASSERT_TRUE(r.WaitToSee("domain: v3\n"));
}

TEST(FileWatcher, SeesKubernetesConfigMapSwapsWatchingTheFile) {
  TempDir dir;
  ConfigMapVolume volume(dir.path());
  Recorder r(dir / "ratelimit.yaml");
  auto w = Watch({(dir / "ratelimit.yaml").string()}, r);
  volume.Publish("domain: v2\n");
  ASSERT_TRUE(r.WaitToSee("domain: v2\n"));
  volume.Publish("domain: v3\n");
  ASSERT_TRUE(r.WaitToSee("domain: v3\n"));
  // Only the file counts: the link swap and the old directory's removal are one change each
  // time, however the events fall into bursts.
  EXPECT_EQ(r.changes(), 2);
}

TEST(FileWatcher, SeesFilesAddedToAndRemovedFromADirectory) {
  TempDir dir;
  Write(dir / "a.yaml", "domain: a\n");
  Recorder r;
  auto w = Watch({dir.path().string()}, r);
  Write(dir / "b.yaml", "domain: b\n");
  ASSERT_TRUE(r.WaitForChanges(1));
  fs::remove(dir / "a.yaml");
  ASSERT_TRUE(r.WaitForChanges(2));
}

TEST(FileWatcher, AnUnrelatedFileBesideAWatchedOneIsNoChange) {
  TempDir dir;
  Write(dir / "a.yaml", "domain: a\n");
  Recorder r;
  auto w = Watch({(dir / "a.yaml").string()}, r);
  Write(dir / "notes.txt", "unrelated\n");
  fs::create_directory(dir / "sub");
  ASSERT_TRUE(r.WaitForChecks(1));    // the events were seen and compared...
  EXPECT_FALSE(r.AnyCheckChanged());  // ...and found no change
  EXPECT_EQ(r.changes(), 0);
  Write(dir / "a.yaml", "domain: b\n");
  ASSERT_TRUE(r.WaitForChanges(1));
}

TEST(FileWatcher, ABurstOfWritesIsOneCallNotOnePerWrite) {
  TempDir dir;
  Write(dir / "a.yaml", "domain: a\n");
  Recorder r(dir / "a.yaml");
  auto w = Watch({(dir / "a.yaml").string()}, r);
  for (int i = 0; i < 50; ++i) Write(dir / "a.yaml", "domain: " + std::to_string(i) + "\n");
  ASSERT_TRUE(r.WaitToSee("domain: 49\n"));
  // 50 writes, at least 100 events; debounced, a handful of calls at most even on a busy machine.
  EXPECT_GE(w->counters().events, 50u);
  EXPECT_LE(r.changes(), 5);
}

TEST(FileWatcher, SeesAFileThatAppearsAndADirectoryCreatedAgain) {
  TempDir dir;
  fs::create_directory(dir / "conf");
  Recorder r;
  auto w = Watch({(dir / "late.yaml").string(), (dir / "conf").string()}, r);
  Write(dir / "late.yaml", "domain: late\n");
  ASSERT_TRUE(r.WaitForChanges(1));
  fs::remove_all(dir / "conf");
  fs::create_directory(dir / "conf");
  Write(dir / "conf" / "x.yaml", "domain: x\n");
  ASSERT_TRUE(r.WaitForChanges(2));
  const int before = r.changes();
  Write(dir / "conf" / "y.yaml", "domain: y\n");  // the new directory is watched
  ASSERT_TRUE(r.WaitForChanges(before + 1));
}

// A writer that rewrites the file in place: truncates it, writes a prefix that is itself valid
// YAML, pauses, then writes the rest. The watcher reads the prefix (the burst of events is over,
// or max_delay forced a comparison), yet must not report it: the read must repeat, unchanged,
// `settle` later, and by then the rest is there.
class TornWrite : public ::testing::TestWithParam<int> {};

TEST_P(TornWrite, TheHalfWrittenFileIsNeverReported) {
  const std::chrono::milliseconds pause(GetParam());
  const std::string full = "domain: edge\ndescriptors:\n  - key: a\n  - key: b\n";
  const std::string prefix = "domain: edge\ndescriptors:\n  - key: a\n";
  TempDir dir;
  Write(dir / "rl.yaml", "domain: old\n");
  ManualClock clock;
  Recorder r(dir / "rl.yaml", &clock);
  FileWatcher::Options options = r.Options();
  options.settle = std::chrono::milliseconds(100);
  auto w = FileWatcher::Start({(dir / "rl.yaml").string()}, r.OnChange(), options);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  // Moves the watcher's time on until `done` (each step lets the watcher's thread run).
  const auto advance_until = [&](const std::function<bool()>& done) {
    for (int i = 0; i < 1000 && !done(); ++i) {
      clock.Advance(std::chrono::milliseconds(10));
      r.WaitForAnything(std::chrono::milliseconds(20));
    }
    return done();
  };

  std::ofstream out(dir / "rl.yaml", std::ios::binary | std::ios::trunc);
  out << prefix << std::flush;
  ASSERT_TRUE(advance_until([&] { return r.checks() >= 1; }));  // the prefix was read...
  EXPECT_EQ((*w)->counters().unsettled, 1u);
  EXPECT_EQ(r.changes(), 0);  // ...and not reported
  clock.Advance(pause);       // the writer's pause, shorter than `settle`
  out << full.substr(prefix.size()) << std::flush;
  out.close();
  ASSERT_TRUE(advance_until([&] { return r.changes() >= 1; }));
  EXPECT_EQ(r.all_seen(), std::vector<std::string>{full});
}

INSTANTIATE_TEST_SUITE_P(PausesFrom1To99Ms, TornWrite, ::testing::Values(1, 8, 50, 99));

// A file that never stops changing is never stable, so it is not reported while it changes;
// once it stops, it is (one call).
TEST(FileWatcher, AFileThatKeepsChangingIsReportedOnceItStops) {
  TempDir dir;
  Write(dir / "a.yaml", "domain: a\n");
  ManualClock clock;
  Recorder r(dir / "a.yaml", &clock);
  auto w = FileWatcher::Start({(dir / "a.yaml").string()}, r.OnChange(), r.Options());
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  for (int i = 0; i < 20; ++i) {
    Write(dir / "a.yaml", "domain: " + std::to_string(i) + "\n");
    const uint64_t checks = (*w)->counters().checks;
    // Past the debounce, not past the settle time since the last read: compared, unsettled.
    for (int j = 0; j < 500 && (*w)->counters().checks == checks; ++j) {
      clock.Advance(std::chrono::milliseconds(5));
      r.WaitForAnything(std::chrono::milliseconds(20));
    }
    ASSERT_GT((*w)->counters().checks, checks);
  }
  EXPECT_EQ(r.changes(), 0);
  EXPECT_GE((*w)->counters().unsettled, 10u);
  for (int i = 0; i < 1000 && r.changes() == 0; ++i) {
    clock.Advance(std::chrono::milliseconds(10));
    r.WaitForAnything(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(r.all_seen(), std::vector<std::string>{"domain: 19\n"});
}

TEST(FileWatcher, RefusesWhatItCannotWatch) {
  const auto noop = [] {};
  const FileWatcher::Options options{.clock = &SystemClock::Instance()};
  EXPECT_EQ(FileWatcher::Start({fs::temp_directory_path().string()}, noop, {}).status().message(),
            "file watcher: no clock");
  EXPECT_EQ(FileWatcher::Start({}, noop, options).status().code(), StatusCode::kInvalidArgument);
  auto missing = FileWatcher::Start({"/nonexistent-caudal-dir/ratelimit.yaml"}, noop, options);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(),
            "/nonexistent-caudal-dir/ratelimit.yaml: its directory does not exist");
  std::vector<std::string> many(17, fs::temp_directory_path().string());
  EXPECT_EQ(FileWatcher::Start(many, noop, options).status().message(),
            "file watcher: at most 16 paths");
}

}  // namespace
}  // namespace caudal

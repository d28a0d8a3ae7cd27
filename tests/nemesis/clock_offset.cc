// libcaudal_clock_offset.so: a test-only LD_PRELOAD that offsets a process's real-time clock
// (clock_gettime of CLOCK_REALTIME and its coarse form, gettimeofday, time) by a number of
// microseconds read, on every call, from an 8-byte file named by CAUDAL_CLOCK_OFFSET_FILE (a
// signed little-endian integer; the harness rewrites it in place to skew or jump the clock, and
// must never truncate it: a read of the mapping past the file's end is a SIGBUS).
// Monotonic clocks are left alone. Without the variable, or with a file that cannot be mapped,
// the offset is 0.
//
// Why not libfaketime: Debian's aborts inside Debian's redis-server at start-up. This one calls
// the kernel directly (no dlsym, no allocation, nothing to initialise but one mmap), so it is
// safe before main and from any thread.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>

namespace {

const std::atomic<int64_t>* Mapped() {
  static const std::atomic<int64_t>* const offset = []() -> const std::atomic<int64_t>* {
    const char* path = std::getenv("CAUDAL_CLOCK_OFFSET_FILE");
    if (path == nullptr) return nullptr;
    const int fd = static_cast<int>(syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC));
    if (fd < 0) return nullptr;
    void* p = mmap(nullptr, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
    syscall(SYS_close, fd);
    return p == MAP_FAILED ? nullptr : static_cast<const std::atomic<int64_t>*>(p);
  }();
  return offset;
}

int64_t OffsetMicros() {
  const std::atomic<int64_t>* p = Mapped();
  return p == nullptr ? 0 : p->load(std::memory_order_relaxed);
}

int RealClock(clockid_t id, struct timespec* ts) {
  return static_cast<int>(syscall(SYS_clock_gettime, id, ts));
}

void Shift(struct timespec* ts, int64_t micros) {
  int64_t ns = static_cast<int64_t>(ts->tv_nsec) + (micros % 1000000) * 1000;
  int64_t s = static_cast<int64_t>(ts->tv_sec) + micros / 1000000;
  if (ns < 0) {
    ns += 1000000000;
    --s;
  } else if (ns >= 1000000000) {
    ns -= 1000000000;
    ++s;
  }
  ts->tv_sec = static_cast<time_t>(s);
  ts->tv_nsec = static_cast<long>(ns);
}

}  // namespace

extern "C" {

int clock_gettime(clockid_t id, struct timespec* ts) {
  const int rc = RealClock(id, ts);
  if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) Shift(ts, OffsetMicros());
  return rc;
}

int gettimeofday(struct timeval* tv, void* /*tz*/) {
  struct timespec ts;
  const int rc = RealClock(CLOCK_REALTIME, &ts);
  if (rc != 0) return rc;
  Shift(&ts, OffsetMicros());
  tv->tv_sec = ts.tv_sec;
  tv->tv_usec = static_cast<suseconds_t>(ts.tv_nsec / 1000);
  return 0;
}

time_t time(time_t* out) {
  struct timespec ts;
  if (RealClock(CLOCK_REALTIME, &ts) != 0) return static_cast<time_t>(-1);
  Shift(&ts, OffsetMicros());
  if (out != nullptr) *out = ts.tv_sec;
  return ts.tv_sec;
}

}  // extern "C"

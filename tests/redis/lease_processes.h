// Several forked processes deciding on one Redis, each reporting every admission to the parent as
// it happens (time and units), so that the parent counts exactly, even for a process killed
// mid-run; and the checks of what they admitted together: the worst interval against
// B + r·t, the ideal (one exact limiter on the same requests), Redis's command counts.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/exact_math.h"
#include "decorators/lease_store.h"
#include "support/redis_server.h"

namespace caudal::lease_processes {

using exact::Int128;

struct Admission {
  int64_t at_us = 0;  // the machine's wall clock, which Redis's TIME reads too
  int64_t units = 0;
};

struct Reported {
  std::vector<Admission> admitted;
  int64_t offered = 0;                   // units asked for
  int64_t decisions = 0;                 // requests decided (admitted or not)
  std::vector<Admission> offers;         // every request, as asked
  std::map<pid_t, LeaseOwed> last_owed;  // per process: what it owed the store when it last said
  std::map<pid_t, std::map<std::string, int64_t>> notes;  // per process: what it counted (Note)
  int64_t unreturned = 0;  // what processes that ended owed the store after giving back
  int64_t admitted_units = 0;
};

// Waits (up to 10 s, looking every millisecond) until `leases` has no ask in flight: after the
// store is killed, a renewal sent before may still be granted, so what the leases hold is known
// once none is (waiting on the store's answer or its connection's end, not on a time). False if
// one still is.
inline bool NoAskInFlight(const LeaseStore& leases) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (leases.Owed().asked > 0 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return leases.Owed().asked == 0;
}

inline int64_t WallMicros() {
  return std::chrono::duration_cast<Micros>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A child's report: "a <at_us> <units>" per admission, "o <at_us> <units>" per request and
// "h <held> <asked> <ending>" (LeaseOwed) after it, "n <name> <value>" for anything else it
// counted, written as they happen (one write each), so a
// process killed mid-run has reported all it admitted but at most the request it was deciding.
class Reporter {
 public:
  explicit Reporter(int fd) : fd_(fd) {}
  void Offered(int64_t at_us, int64_t units) {
    Write("o " + std::to_string(at_us) + " " + std::to_string(units) + "\n");
  }
  void Owes(const LeaseOwed& o) {
    Write("h " + std::to_string(o.held) + " " + std::to_string(o.asked) + " " +
          std::to_string(o.ending) + "\n");
  }
  // At the end: what the store took and neither was spent nor came back.
  void Unreturned(int64_t units) { Write("u " + std::to_string(units) + "\n"); }
  // Anything else a process counted, by a name without spaces.
  void Note(std::string_view name, int64_t value) {
    Write("n " + std::string(name) + " " + std::to_string(value) + "\n");
  }
  void Admitted(int64_t at_us, int64_t units) {
    Write("a " + std::to_string(at_us) + " " + std::to_string(units) + "\n");
  }

 private:
  void Write(const std::string& line) { (void)!::write(fd_, line.data(), line.size()); }
  int fd_;
};

// A forked process and what it has reported so far, read as it writes: a child must never wait
// on a full pipe while its leases run out.
struct Child {
  pid_t pid = -1;
  int fd = -1;
  std::shared_ptr<std::string> text = std::make_shared<std::string>();
  std::shared_ptr<std::thread> reader;
};

// Forks `processes` processes running `work(p, report)`, then reads their reports. Every fork comes
// before the first reader thread: a process forked while another thread holds the allocator's lock
// (as AddressSanitizer's is, by a reader appending) would wait on that lock forever.
inline std::vector<Child> ForkAll(int processes, const std::function<void(int, Reporter&)>& work) {
  std::vector<Child> children;
  for (int p = 0; p < processes; ++p) {
    int fds[2];
    if (::pipe(fds) != 0) ADD_FAILURE() << "pipe";
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      Reporter r(fds[1]);
      work(p, r);
      ::_exit(0);
    }
    ::close(fds[1]);
    Child c;
    c.pid = pid;
    c.fd = fds[0];
    children.push_back(c);
  }
  for (Child& c : children) {
    c.reader = std::make_shared<std::thread>([fd = c.fd, text = c.text] {
      char buf[1 << 16];
      for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;)
        text->append(buf, static_cast<size_t>(n));
      ::close(fd);
    });
  }
  return children;
}

// Waits for every child and its report; `killed` children may end by signal, mid-line.
inline Reported Collect(const std::vector<Child>& children, const std::vector<pid_t>& killed = {}) {
  Reported run;
  for (const Child& c : children) {
    c.reader->join();
    int status = 0;
    ::waitpid(c.pid, &status, 0);
    if (std::find(killed.begin(), killed.end(), c.pid) == killed.end()) {
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    // A line cut by the kill is not part of the report.
    const std::string text = c.text->substr(0, c.text->rfind('\n') + 1);
    std::istringstream in(text);
    for (std::string tag; in >> tag;) {
      if (tag == "o") {
        int64_t at = 0, units = 0;
        in >> at >> units;
        run.offers.push_back({at, units});
        run.offered += units;
        ++run.decisions;
      } else if (tag == "h") {
        LeaseOwed& o = run.last_owed[c.pid];
        in >> o.held >> o.asked >> o.ending;
      } else if (tag == "n") {
        std::string name;
        int64_t value = 0;
        in >> name >> value;
        run.notes[c.pid][name] = value;
      } else if (tag == "u") {
        int64_t units = 0;
        in >> units;
        run.unreturned += units;
      } else {
        Admission a;
        in >> a.at_us >> a.units;
        run.admitted.push_back(a);
        run.admitted_units += a.units;
      }
    }
  }
  const auto by_time = [](const Admission& x, const Admission& y) { return x.at_us < y.at_us; };
  std::sort(run.admitted.begin(), run.admitted.end(), by_time);
  std::sort(run.offers.begin(), run.offers.end(), by_time);
  return run;
}

// max over intervals [t_i, t_j] of p·admitted − n·(t_j − t_i) − p·B, in units·p: at most n·ttl.
inline Int128 WorstExcess(const std::vector<Admission>& a, const Limit& l) {
  const Int128 n = l.refill_count();
  const Int128 p = l.refill_period_us();
  Int128 best = 0, prefix = 0, worst = -p * l.capacity();
  for (size_t j = 0; j < a.size(); ++j) {
    best = j == 0 ? n * a[0].at_us : std::max(best, n * a[j].at_us - p * prefix);
    prefix += a[j].units;
    worst = std::max(worst, p * prefix - n * a[j].at_us + best - p * l.capacity());
  }
  return worst;
}

// What one exact limiter without leases would have admitted of `offers`: the ideal.
inline int64_t Ideal(const std::vector<Admission>& offers, const Limit& limit) {
  std::optional<CompactState> state;
  int64_t admitted = 0;
  for (const Admission& o : offers) {
    const Step s = DecideCompact(limit, state ? &*state : nullptr, Micros(o.at_us), o.units);
    if (s.changed) state = s.next;
    if (s.decision.allowed()) admitted += o.units;
  }
  return admitted;
}

// Calls of caudal's scripts Redis has run (EVALSHA and FCALL), from INFO commandstats.
inline int64_t ScriptCalls(const testing::RedisServer& server) {
  Result<std::string> info = server.Command({"INFO", "commandstats"});
  if (!info.ok()) return -1;
  int64_t calls = 0;
  for (const char* field : {"cmdstat_evalsha:calls=", "cmdstat_fcall:calls="}) {
    const size_t at = info->find(field);
    if (at != std::string::npos) calls += std::stoll(info->substr(at + std::strlen(field)));
  }
  return calls;
}

}  // namespace caudal::lease_processes

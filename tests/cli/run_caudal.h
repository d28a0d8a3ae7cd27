// Runs the `caudal` executable under test and captures what it printed.
#pragma once

#include <string>
#include <vector>

namespace caudal::testing {

struct Outcome {
  int exit_code = -1;  // -1 when it did not exit normally (killed by a signal)
  std::string out;
  std::string err;
};

// Runs CAUDAL_BINARY with `args`, waits for it, and returns its exit code and output.
// Fails the current test (and returns exit_code -1) when it cannot be started.
Outcome RunCaudal(const std::vector<std::string>& args);

// A fresh path under the test's temporary directory; `name` makes it readable.
std::string TempPath(const std::string& name);

// Writes `contents` to `path` (overwriting it).
void WriteFile(const std::string& path, const std::string& contents);
std::string ReadFile(const std::string& path);

}  // namespace caudal::testing

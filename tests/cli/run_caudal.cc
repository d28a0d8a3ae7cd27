#include "cli/run_caudal.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <fstream>
#include <sstream>

extern char** environ;

namespace caudal::testing {

std::string TempPath(const std::string& name) {
  static std::atomic<int> counter{0};
  return ::testing::TempDir() + "caudal_cli_" + std::to_string(getpid()) + "_" +
         std::to_string(counter++) + "_" + name;
}

void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << contents;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Outcome RunCaudal(const std::vector<std::string>& args) {
  const std::string out_path = TempPath("stdout");
  const std::string err_path = TempPath("stderr");
  std::vector<std::string> argv_strings = {CAUDAL_BINARY};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  Outcome o;
  if (rc != 0) {
    ADD_FAILURE() << "cannot start " << CAUDAL_BINARY << ": errno " << rc;
    return o;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  o.out = ReadFile(out_path);
  o.err = ReadFile(err_path);
  unlink(out_path.c_str());
  unlink(err_path.c_str());
  return o;
}

}  // namespace caudal::testing

// config_reference [--write] FILE...: checks (or, with --write, rewrites) the sections of FILEs
// generated from the field tables (config_reference.h). Exit 0 when every section is what the
// tables say, 1 when one differs (naming the first differing line), 2 on a usage error.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "config/config_reference.h"

namespace {

using caudal::config_internal::GeneratedSection;

constexpr std::string_view kRegenerate = "cmake --build build --target config-reference";

// The first line where `a` and `b` differ, 1-based, with both lines.
std::string FirstDifference(const std::string& a, const std::string& b) {
  std::istringstream x(a), y(b);
  std::string l, m;
  for (int line = 1;; ++line) {
    const bool more_a = static_cast<bool>(std::getline(x, l));
    const bool more_b = static_cast<bool>(std::getline(y, m));
    if (!more_a && !more_b) return "";
    if (!more_a || !more_b || l != m) {
      return "line " + std::to_string(line) + "\n  the file:   " + (more_a ? l : "(end)") +
             "\n  the tables: " + (more_b ? m : "(end)");
    }
  }
}

// 0 when `path` holds the generated text (after writing it, if asked), 1 when it differs.
int Process(const std::string& path, const std::vector<GeneratedSection>& sections, bool write) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << path << ": cannot read\n";
    return 2;
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string doc = buffer.str();
  std::string updated = doc;
  int found = 0;
  for (const GeneratedSection& s : sections) {
    auto next = caudal::config_internal::ReplaceGenerated(updated, s.name, s.text);
    if (next.status().code() == caudal::StatusCode::kNotFound) continue;
    if (!next.ok()) {
      std::cerr << path << ": " << next.status().message() << "\n";
      return 2;
    }
    updated = std::move(*next);
    ++found;
  }
  if (found == 0) {
    std::cerr << path << ": no generated section\n";
    return 2;
  }
  if (updated == doc) return 0;
  if (write) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << updated;
    std::cout << path << ": rewritten from the field tables\n";
    return 0;
  }
  std::cerr << path << ": the reference differs from the field tables at "
            << FirstDifference(doc, updated) << "\nregenerate it: " << kRegenerate << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  bool write = false;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--write") {
      write = true;
    } else {
      files.emplace_back(arg);
    }
  }
  if (files.empty()) {
    std::cerr << "usage: config_reference [--write] FILE...\n";
    return 2;
  }
  const std::vector<GeneratedSection> sections = caudal::config_internal::GeneratedSections();
  int status = 0;
  for (const std::string& f : files) status = std::max(status, Process(f, sections, write));
  return status;
}

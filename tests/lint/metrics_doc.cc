// metrics_doc: docs/operations.md's list of metrics, generated from kMetricTable
// (src/observe/metrics.h) between two marker lines.
//   metrics_doc check FILE   exits 1, showing both, when the list differs from the table
//   metrics_doc write FILE   rewrites the list from the table (cmake --build build -t metrics-doc)
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>

#include "observe/metrics.h"

namespace {

constexpr std::string_view kBegin =
    "<!-- metrics: generated from kMetricTable (src/observe/metrics.h); "
    "regenerate with `cmake --build build --target metrics-doc` -->\n";
constexpr std::string_view kEnd = "<!-- end of metrics -->\n";

// A table cell: a pipe would end it.
std::string Cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

std::string Generated() {
  std::string out = "| metric | type | what |\n|---|---|---|\n";
  for (const caudal::MetricDef& def : caudal::kMetricTable) {
    out.append("| `").append(def.name);
    for (size_t i = 0; i < def.LabelCount(); ++i) {
      out.append(i == 0 ? "{" : ",").append(def.labels[i]);
    }
    if (def.LabelCount() > 0) out += '}';
    out.append("` | ").append(caudal::MetricTypeName(def.type));
    out.append(" | ").append(Cell(def.help)).append(" |\n");
  }
  return out;
}

int Fail(const std::string& message) {
  std::cerr << "metrics_doc: " << message << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc == 3 ? argv[1] : "";
  if (mode != "check" && mode != "write") return Fail("usage: metrics_doc check|write FILE");
  const std::string path = argv[2];
  std::ifstream in(path);
  if (!in) return Fail("cannot read " + path);
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string doc = buf.str();
  const size_t begin = doc.find(kBegin);
  const size_t end = begin == std::string::npos ? begin : doc.find(kEnd, begin);
  if (end == std::string::npos) {
    return Fail(path + " has no marker lines; the list goes between\n" + std::string(kBegin) +
                "and\n" + std::string(kEnd));
  }
  const size_t from = begin + kBegin.size();
  const std::string found = doc.substr(from, end - from);
  const std::string want = Generated();
  if (mode == "check") {
    if (found == want) {
      std::cout << path << ": the metrics list matches kMetricTable\n";
      return 0;
    }
    std::cerr << path << ": the metrics list differs from kMetricTable; regenerate it with\n"
              << "  cmake --build build --target metrics-doc\n--- in the file:\n"
              << found << "--- from the table:\n"
              << want;
    return 1;
  }
  if (found == want) return 0;
  std::ofstream out(path, std::ios::trunc);
  out << doc.substr(0, from) << want << doc.substr(end);
  if (!out.flush()) return Fail("cannot write " + path);
  std::cout << path << ": metrics list rewritten from kMetricTable\n";
  return 0;
}

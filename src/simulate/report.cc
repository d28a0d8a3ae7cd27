#include "simulate/report.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <vector>

namespace caudal::simulate {
namespace {

// How far above its bound a maximum went: "OVER 2.00x", or "OVER by 1" when the ratio would
// print as 1.00.
std::string Excess(int64_t max, int64_t bound) {
  const double r = static_cast<double>(max) / static_cast<double>(bound);
  if (r < 1.005) return "OVER by " + std::to_string(max - bound);
  std::array<char, 32> buf{};
  std::snprintf(buf.data(), buf.size(), "OVER %.2fx", r);
  return buf.data();
}

struct Column {
  std::string header;
  bool left_aligned = false;
};

void AppendCell(std::string& out, const std::string& text, size_t width, bool left) {
  const std::string pad(width - std::min(width, text.size()), ' ');
  out += left ? text + pad : pad + text;
}

}  // namespace

std::string RenderTable(const Simulation& sim) {
  const std::vector<Column> columns = {{"algorithm", true},
                                       {"offered"},
                                       {"admitted"},
                                       {"rejected"},
                                       {"max in " + FormatDuration(sim.window)},
                                       {"bound"},
                                       {"", true}};
  std::vector<std::vector<std::string>> rows;
  for (const AlgorithmRun& r : sim.runs) {
    rows.push_back({std::string(AlgorithmName(r.algorithm)), std::to_string(r.offered),
                    std::to_string(r.admitted), std::to_string(r.rejected),
                    std::to_string(r.max_in_window), std::to_string(r.bound),
                    r.within_bound() ? "ok" : Excess(r.max_in_window, r.bound)});
  }
  std::vector<size_t> widths;
  for (const Column& c : columns) widths.push_back(c.header.size());
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }

  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t i = 0; i < cells.size(); ++i) {
      if (i > 0) text += "  ";
      AppendCell(text, cells[i], widths[i], columns[i].left_aligned);
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += text + "\n";
  };
  std::vector<std::string> header;
  for (const Column& c : columns) header.push_back(c.header);
  line(header);
  for (const auto& row : rows) line(row);
  for (const std::string& s : sim.skipped) out += "skipped " + s + "\n";
  out += "\nmax in " + FormatDuration(sim.window) +
         ": the most one key had admitted within any window of that length.\n"
         "bound: the limit for the window algorithms, B + r·W for token_bucket and gcra.\n";
  return out;
}

std::string RenderJson(const Simulation& sim) {
  std::string out = "[";
  for (size_t i = 0; i < sim.runs.size(); ++i) {
    const AlgorithmRun& r = sim.runs[i];
    out += i == 0 ? "\n  {" : ",\n  {";
    out += "\"algorithm\": " + JsonQuote(AlgorithmName(r.algorithm));
    out += ", \"offered\": " + std::to_string(r.offered);
    out += ", \"admitted\": " + std::to_string(r.admitted);
    out += ", \"rejected\": " + std::to_string(r.rejected);
    out += ", \"max_in_window\": " + std::to_string(r.max_in_window);
    out += ", \"bound\": " + std::to_string(r.bound);
    out += ", \"within_bound\": ";
    out += r.within_bound() ? "true}" : "false}";
  }
  out += sim.runs.empty() ? "]\n" : "\n]\n";
  return out;
}

std::string JsonQuote(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          std::array<char, 8> buf{};
          std::snprintf(buf.data(), buf.size(), "\\u%04x", static_cast<unsigned>(c));
          out += buf.data();
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

}  // namespace caudal::simulate

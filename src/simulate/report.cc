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

void AppendCell(std::string& out, const std::string& text, size_t width, bool left) {
  const std::string pad(width - std::min(width, text.size()), ' ');
  out += left ? text + pad : pad + text;
}

// The same requests decided with leases (SimulationOptions::leases), beside replication.
std::string RenderLeaseTable(const Simulation& sim) {
  const std::vector<TableColumn> columns = {
      {"algorithm", true}, {"admitted"}, {"rejected"}, {"max in " + FormatDuration(sim.window)},
      {"bound"},           {"local"},    {"p99"},      {"unspent"},
      {"failed"},          {"", true}};
  std::vector<std::vector<std::string>> rows;
  for (const AlgorithmRun& r : sim.runs) {
    if (!r.leases) continue;
    const LeaseRun& l = *r.leases;
    rows.push_back({std::string(AlgorithmName(r.algorithm)), std::to_string(l.admitted),
                    std::to_string(l.rejected), std::to_string(l.max_in_window),
                    std::to_string(r.lease_bound), std::to_string(l.local),
                    l.p99.count() == 0 ? "0" : FormatDuration(l.p99), std::to_string(l.unspent),
                    std::to_string(l.failed),
                    r.leases_within_bound() ? "ok" : Excess(l.max_in_window, r.lease_bound)});
  }
  const Micros lag = sim.replication_lag.value_or(Micros(0));
  std::string out = "\nleases: one store, each region " + FormatDuration(lag) +
                    " from it (a round trip of " + FormatDuration(2 * lag) + "); ttl " +
                    FormatDuration(std::chrono::duration_cast<Micros>(sim.lease_ttl)) + "\n";
  out += RenderRows(columns, rows);
  out +=
      "\nbound, with leases: B + r·(W + ttl) for token_bucket and gcra, the limit for the "
      "windows.\nlocal: decided in the region at once (from its leases, refused dry, or by "
      "the failure mode); p99: a decision's latency, 0 locally, a round trip otherwise.\n"
      "unspent: units the store consumed that no region admitted (leases given back or lost). "
      "failed: refused by the failure mode (deny) while cut off.\n";
  return out;
}

}  // namespace

std::string RenderRows(const std::vector<TableColumn>& columns,
                       const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const TableColumn& c : columns) widths.push_back(c.header.size());
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
  for (const TableColumn& c : columns) header.push_back(c.header);
  line(header);
  for (const auto& row : rows) line(row);
  return out;
}

std::string RenderTable(const Simulation& sim) {
  const std::vector<TableColumn> columns = {{"algorithm", true},
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
  std::string out = RenderRows(columns, rows);
  for (const std::string& s : sim.skipped) out += "skipped " + s + "\n";
  out += "\nmax in " + FormatDuration(sim.window) +
         ": the most one key had admitted within any window of that length.\n"
         "bound: the limit for the window algorithms, B + r·W for token_bucket and gcra.\n";
  if (sim.leases) out += RenderLeaseTable(sim);
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
    out += r.within_bound() ? "true" : "false";
    if (r.leases) {
      const LeaseRun& l = *r.leases;
      out += ", \"leases\": {\"admitted\": " + std::to_string(l.admitted);
      out += ", \"rejected\": " + std::to_string(l.rejected);
      out += ", \"max_in_window\": " + std::to_string(l.max_in_window);
      out += ", \"bound\": " + std::to_string(r.lease_bound);
      out += ", \"within_bound\": ";
      out += r.leases_within_bound() ? "true" : "false";
      out += ", \"local\": " + std::to_string(l.local);
      out += ", \"p99_us\": " + std::to_string(l.p99.count());
      out += ", \"unspent\": " + std::to_string(l.unspent);
      out += ", \"failed\": " + std::to_string(l.failed) + "}";
    }
    out += "}";
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

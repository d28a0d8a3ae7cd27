// Rendering a Simulation as text: the table people read and the JSON scripts read.
// Pure functions of their arguments.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "simulate/simulator.h"

namespace caudal::simulate {

// A fixed-width table, one row per algorithm, then one line per skipped algorithm and a short
// legend. Columns: algorithm, offered, admitted, rejected, "max in <W>", bound, and whether the
// maximum stayed within the bound ("ok", "OVER 2.00x", or "OVER by 1" when the ratio rounds
// to 1.00).
std::string RenderTable(const Simulation& sim);

// A JSON array, one object per algorithm run, in table order:
//   {"algorithm": "fixed_window", "offered": 2200, "admitted": 1100, "rejected": 1100,
//    "max_in_window": 200, "bound": 100, "within_bound": false}
// followed by a newline. Skipped algorithms are absent.
std::string RenderJson(const Simulation& sim);

// A column of a text table: its header, and whether its cells are left-aligned (numbers are not).
struct TableColumn {
  std::string header;
  bool left_aligned = false;
};
// `rows` under `columns`' headers, each column as wide as its widest cell, two spaces apart, no
// trailing spaces; a line each.
std::string RenderRows(const std::vector<TableColumn>& columns,
                       const std::vector<std::vector<std::string>>& rows);

// `s` as a JSON string literal, quotes included (", \ and control characters escaped).
std::string JsonQuote(std::string_view s);

}  // namespace caudal::simulate

// Rendering a DimensionRun (`caudal simulate --config`): the tables people read, the JSON scripts
// read, and a chart. Pure functions of their arguments.
#pragma once

#include <string>
#include <string_view>

#include "simulate/dimension_run.h"

namespace caudal::simulate {

// Two fixed-width tables and a legend. Per dimension (a column of the trace): units offered,
// admitted and refused. Per limit: policy, field, the dimensions it counts, units offered and
// admitted, the requests it refused, its peak use ("91.4% (3200/3500)") and the limit itself.
std::string RenderDimensionTable(const DimensionRun& run);

// One JSON object, then a newline:
//   {"requests": 6, "admitted": 5, "refused": 1, "too_large": 0, "too_large_error": "",
//    "start_us": 1700000000000000, "step_ms": 10,
//    "dimensions": [{"dimension": "input_tokens", "counted": true, "requests": 6,
//                    "offered": 4200, "admitted": 3200, "admitted_series": [...]}, ...],
//    "limits": [{"policy": "gateway", "field": "limits[1]", "dimension": "input_tokens",
//                "limit": "fixed_window limit=3500 window=1m dimension=input_tokens",
//                "capacity": 3500, "shadow": false, "requests": 6, "offered": 4200,
//                "admitted": 3200, "refusals": 1, "peak_used": 3200, "peak_series": [...]}, ...]}
// Series have a point per step from start_us; a limit's peak_series is 0 in a step where it
// admitted nothing.
std::string RenderDimensionJson(const DimensionRun& run);

// Time on x (seconds from the trace's start), each limit's peak use within a step as a share of
// its capacity on y (a line each, through the steps where it admitted a request), 100% dashed.
// Standalone SVG 1.1.
std::string RenderDimensionSvg(const DimensionRun& run, std::string_view title);

}  // namespace caudal::simulate

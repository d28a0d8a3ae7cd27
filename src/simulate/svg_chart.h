// Rendering a Simulation as an SVG chart: time on x, the most one key had admitted within the
// trailing window on y, one step line per algorithm, the two bounds (the window limit N and the
// buckets' B + r·W) as horizontal lines, labelled axes with ticks, a title and a legend.
// Standalone SVG 1.1 that any browser opens. Pure function of its arguments.
#pragma once

#include <string>

#include "simulate/simulator.h"

namespace caudal::simulate {

struct ChartText {
  std::string title;                // e.g. "boundary-burst, limit 100/1m, burst 100"
  std::string y_unit = "requests";  // what the y values count
};

// Preconditions: the simulation was run with chart_points > 0.
std::string RenderSvg(const Simulation& sim, const ChartText& text);

// `s` with &, <, >, " and ' replaced by XML entities.
std::string XmlEscape(std::string_view s);

// The start of a standalone chart: the XML declaration, the <svg> element `width` × `height`
// (sans-serif, 12 px) and a white background. The caller adds the rest and "</svg>\n".
std::string SvgOpening(double width, double height);

}  // namespace caudal::simulate

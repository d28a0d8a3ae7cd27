#include "simulate/dimension_report.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <vector>

#include "simulate/report.h"
#include "simulate/svg_chart.h"

namespace caudal::simulate {
namespace {

std::string Number(double v, const char* format) {
  std::array<char, 32> buf{};
  std::snprintf(buf.data(), buf.size(), format, v);
  return buf.data();
}

double Share(int64_t used, int64_t capacity) {
  return capacity > 0 ? static_cast<double>(used) / static_cast<double>(capacity) : 0.0;
}

std::string PeakUse(const LimitTally& t) {
  const int64_t capacity = t.limit->capacity();
  return Number(100.0 * Share(t.peak_used, capacity), "%.1f%%") + " (" +
         std::to_string(t.peak_used) + "/" + std::to_string(capacity) + ")";
}

std::string JsonArray(const std::vector<int64_t>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(values[i]);
  }
  return out + "]";
}

}  // namespace

std::string RenderDimensionTable(const DimensionRun& run) {
  std::vector<std::vector<std::string>> dims;
  for (const DimensionTally& d : run.dimensions) {
    dims.push_back({d.dimension, std::to_string(d.offered), std::to_string(d.admitted),
                    std::to_string(d.offered - d.admitted),
                    d.counted ? "" : "(no limit of these policies counts it)"});
  }
  std::string out =
      RenderRows({{"dimension", true}, {"offered"}, {"admitted"}, {"refused"}, {"", true}}, dims);
  std::vector<std::vector<std::string>> limits;
  for (const LimitTally& t : run.limits) {
    limits.push_back({t.policy + (t.shadow ? " (shadow)" : ""), t.field, t.limit->DimensionText(),
                      std::to_string(t.offered), std::to_string(t.admitted),
                      std::to_string(t.refusals), PeakUse(t), t.limit->ToString()});
  }
  out += "\n" + RenderRows({{"policy", true},
                            {"field", true},
                            {"counts", true},
                            {"offered"},
                            {"admitted"},
                            {"refusals"},
                            {"peak use"},
                            {"limit", true}},
                           limits);
  out += "\nadmitted " + std::to_string(run.admitted) + " of " + std::to_string(run.requests) +
         " requests; " + std::to_string(run.refused) + " refused over a limit";
  if (run.too_large > 0) {
    out += ", " + std::to_string(run.too_large) +
           " too large for a limit (refused as /v1/check refuses them, 400); the first: " +
           run.too_large_error;
  }
  out +=
      ".\noffered, admitted, refused: units (a limit's: of the dimensions it counts, summed).\n"
      "refusals: the requests a limit refused; all-or-nothing, nothing of a refused request is "
      "charged anywhere.\npeak use: the most of a limit one key had used, just after an admitted "
      "request.\n";
  return out;
}

std::string RenderDimensionJson(const DimensionRun& run) {
  std::string out = "{\"requests\": " + std::to_string(run.requests) +
                    ", \"admitted\": " + std::to_string(run.admitted) +
                    ", \"refused\": " + std::to_string(run.refused) +
                    ", \"too_large\": " + std::to_string(run.too_large) +
                    ", \"too_large_error\": " + JsonQuote(run.too_large_error) +
                    ", \"start_us\": " + std::to_string(run.start.count()) +
                    ", \"step_ms\": " + std::to_string(run.step.count() / 1000) +
                    ",\n \"dimensions\": [";
  for (size_t i = 0; i < run.dimensions.size(); ++i) {
    const DimensionTally& d = run.dimensions[i];
    out += i == 0 ? "\n  {" : ",\n  {";
    out += "\"dimension\": " + JsonQuote(d.dimension);
    out += ", \"counted\": ";
    out += d.counted ? "true" : "false";
    out += ", \"requests\": " + std::to_string(d.requests);
    out += ", \"offered\": " + std::to_string(d.offered);
    out += ", \"admitted\": " + std::to_string(d.admitted);
    out += ", \"admitted_series\": " + JsonArray(d.admitted_series) + "}";
  }
  out += "],\n \"limits\": [";
  for (size_t i = 0; i < run.limits.size(); ++i) {
    const LimitTally& t = run.limits[i];
    out += i == 0 ? "\n  {" : ",\n  {";
    out += "\"policy\": " + JsonQuote(t.policy);
    out += ", \"field\": " + JsonQuote(t.field);
    out += ", \"dimension\": " + JsonQuote(t.limit->DimensionText());
    out += ", \"limit\": " + JsonQuote(t.limit->ToString());
    out += ", \"capacity\": " + std::to_string(t.limit->capacity());
    out += ", \"shadow\": ";
    out += t.shadow ? "true" : "false";
    out += ", \"requests\": " + std::to_string(t.requests);
    out += ", \"offered\": " + std::to_string(t.offered);
    out += ", \"admitted\": " + std::to_string(t.admitted);
    out += ", \"refusals\": " + std::to_string(t.refusals);
    out += ", \"peak_used\": " + std::to_string(t.peak_used);
    out += ", \"peak_series\": " + JsonArray(t.peak_series) + "}";
  }
  out += "]}\n";
  return out;
}

std::string RenderDimensionSvg(const DimensionRun& run, std::string_view title) {
  constexpr double kWidth = 900, kHeight = 480, kLeft = 70, kRight = 250, kTop = 40, kBottom = 50;
  constexpr double kTopShare = 1.1;  // the y axis: 0 to 110% of each limit
  static constexpr std::array<const char*, 8> kColors = {
      "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};
  const double step_s = static_cast<double>(run.step.count()) / 1e6;
  size_t points = 1;
  for (const LimitTally& t : run.limits) points = std::max(points, t.peak_series.size());
  const double span = static_cast<double>(points) * step_s;
  auto x = [&](double s) { return kLeft + s / span * (kWidth - kLeft - kRight); };
  auto y = [&](double share) {
    return kHeight - kBottom - std::min(share, kTopShare) / kTopShare * (kHeight - kTop - kBottom);
  };
  auto num = [](double v) { return Number(v, "%.1f"); };
  auto line = [&](double x1, double y1, double x2, double y2, const std::string& style) {
    return "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" +
           num(y2) + "\" " + style + "/>\n";
  };
  auto text = [&](double tx, double ty, const std::string& anchor, const std::string& s) {
    return "<text x=\"" + num(tx) + "\" y=\"" + num(ty) + "\"" +
           (anchor.empty() ? "" : " text-anchor=\"" + anchor + "\"") + ">" + XmlEscape(s) +
           "</text>\n";
  };
  std::string out = SvgOpening(kWidth, kHeight);
  out += text(kLeft, 22, "", std::string(title));
  out += line(kLeft, y(0), x(span), y(0), "stroke=\"black\"");
  out += line(kLeft, y(0), kLeft, kTop, "stroke=\"black\"");
  for (int i = 0; i <= 4; ++i) {
    const double s = span * i / 4;
    out += text(x(s), y(0) + 18, "middle", Number(s, "%.1f") + " s");
    out += text(kLeft - 6, y(0.25 * i) + 4, "end", Number(25.0 * i, "%.0f") + "%");
  }
  out += text(kLeft, kHeight - 10, "",
              "the most of each limit one key had used (its peak in each step); 100% dashed");
  out += line(x(0), y(1), x(span), y(1), "stroke=\"gray\" stroke-dasharray=\"6 4\"");
  for (size_t i = 0; i < run.limits.size(); ++i) {
    const LimitTally& t = run.limits[i];
    const std::string color = kColors[i % kColors.size()];
    std::string pts;
    for (size_t j = 0; j < t.peak_series.size(); ++j) {
      if (t.peak_series[j] == 0) continue;
      const double share = Share(t.peak_series[j], t.limit->capacity());
      pts += num(x((static_cast<double>(j) + 0.5) * step_s)) + "," + num(y(share)) + " ";
    }
    out += "<polyline fill=\"none\" stroke=\"" + color + "\" stroke-width=\"1.5\" points=\"" + pts +
           "\"/>\n";
    const double ly = kTop + 18.0 * static_cast<double>(i);
    out += line(kWidth - kRight + 15, ly, kWidth - kRight + 35, ly,
                "stroke=\"" + color + "\" stroke-width=\"2\"");
    out += text(kWidth - kRight + 40, ly + 4, "",
                t.policy + " " + t.field + " (" + t.limit->DimensionText() + ")");
  }
  out += "</svg>\n";
  return out;
}

}  // namespace caudal::simulate

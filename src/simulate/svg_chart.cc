#include "simulate/svg_chart.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>

#include "algorithms/algorithm.h"

namespace caudal::simulate {
namespace {

constexpr int kWidth = 960;  // at least: wider when the legend needs it (LegendRight)
constexpr int kHeight = 540;
constexpr double kLeft = 80, kRight = 730, kTop = 70, kBottom = 470;  // the plot area
constexpr double kFontSize = 13;
constexpr double kLegendKey = kRight + 20, kLegendText = kRight + 56;  // where legend lines start

std::string Num(double v) {
  std::array<char, 32> buf{};
  std::snprintf(buf.data(), buf.size(), "%.3f", v);
  std::string s = buf.data();
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}

// Lines are drawn in the algorithm table's order, each narrower than the one before, so lines
// that coincide (gcra always equals token_bucket) show as nested stripes instead of hiding each
// other. Colour and dash come from the table.
struct Style {
  std::string_view color;
  std::string width;
  std::string_view dash;  // stroke-dasharray, "" for solid
};

Style StyleFor(Algorithm a) {
  constexpr double kWidest = 7, kNarrowest = 1.5;
  const auto i = static_cast<double>(a);
  const double n = std::max<double>(kAlgorithmCount - 1, 1);
  const AlgorithmInfo& info = AlgorithmInfoOf(a);
  return {info.chart.colour, Num(kWidest - (kWidest - kNarrowest) * i / n), info.chart.dash};
}

std::string StrokeAttrs(const Style& st) {
  std::string a = "stroke=\"" + std::string(st.color) + "\" stroke-width=\"" + st.width + "\"";
  if (!st.dash.empty()) a += " stroke-dasharray=\"" + std::string(st.dash) + "\"";
  return a;
}

// The smallest of 1, 2, 5 times a power of ten that is >= raw.
double NiceStep(double raw) {
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= raw * (1 - 1e-9)) return m * p;
  }
  return 10 * p;
}

struct TimeUnit {
  const char* name;
  double us;
};

TimeUnit UnitFor(int64_t span_us) {
  if (span_us <= 2'000'000) return {"ms", 1e3};
  if (span_us <= 180'000'000) return {"s", 1e6};
  if (span_us <= 3 * 3'600'000'000LL) return {"min", 60e6};
  return {"h", 3600e6};
}

struct Scale {
  double x_min_us, x_span_us, y_max;
  double X(double us) const { return kLeft + (us - x_min_us) / x_span_us * (kRight - kLeft); }
  double Y(double v) const { return kBottom - v / y_max * (kBottom - kTop); }
};

void Text(std::string& out, double x, double y, std::string_view anchor, std::string_view s,
          std::string_view extra = "") {
  out += "<text x=\"" + Num(x) + "\" y=\"" + Num(y) + "\" text-anchor=\"" + std::string(anchor) +
         "\"" + std::string(extra) + ">" + XmlEscape(s) + "</text>\n";
}

void Line(std::string& out, double x1, double y1, double x2, double y2, std::string_view attrs) {
  out += "<line x1=\"" + Num(x1) + "\" y1=\"" + Num(y1) + "\" x2=\"" + Num(x2) + "\" y2=\"" +
         Num(y2) + "\" " + std::string(attrs) + "/>\n";
}

void Axes(std::string& out, const Scale& sc, const TimeUnit& unit, const std::string& y_label) {
  const double y_step = NiceStep(sc.y_max / 6);
  for (double v = 0; v <= sc.y_max * (1 + 1e-9); v += y_step) {
    Line(out, kLeft, sc.Y(v), kRight, sc.Y(v), "stroke=\"#e5e5e5\"");
    Text(out, kLeft - 8, sc.Y(v) + 4, "end", Num(v));
  }
  const double span = sc.x_span_us / unit.us;
  const double x_step = NiceStep(span / 8);
  for (double v = 0; v <= span * (1 + 1e-9); v += x_step) {
    const double x = sc.X(sc.x_min_us + v * unit.us);
    Line(out, x, kBottom, x, kBottom + 5, "stroke=\"#333333\"");
    Text(out, x, kBottom + 20, "middle", Num(v));
  }
  Line(out, kLeft, kBottom, kRight, kBottom, "stroke=\"#333333\"");
  Line(out, kLeft, kTop, kLeft, kBottom, "stroke=\"#333333\"");
  Text(out, (kLeft + kRight) / 2, kBottom + 45, "middle",
       std::string("time since start (") + unit.name + ")", " class=\"axis-label\"");
  const std::string rotate = " class=\"axis-label\" transform=\"rotate(-90 " + Num(22) + " " +
                             Num((kTop + kBottom) / 2) + ")\"";
  Text(out, 22, (kTop + kBottom) / 2, "middle", y_label, rotate);
}

void Bound(std::string& out, const Scale& sc, int64_t value, std::string_view label,
           std::string_view dash) {
  Line(out, kLeft, sc.Y(value), kRight, sc.Y(value),
       "class=\"bound\" stroke=\"#444444\" stroke-width=\"1.5\" stroke-dasharray=\"" +
           std::string(dash) + "\"");
  // Drawn after the series, with a white halo, so the data never hides the label.
  Text(out, kRight - 4, sc.Y(value) - 6, "end", label,
       " fill=\"#222222\" stroke=\"#ffffff\" stroke-width=\"4\" paint-order=\"stroke\"");
}

// A run's series; with leases (`leased`), its lease run's, thinner and dashed.
void Series(std::string& out, const Scale& sc, const Simulation& sim, const AlgorithmRun& run,
            bool leased = false) {
  const Style st = StyleFor(run.algorithm);
  const std::vector<int64_t>& series = leased ? run.leases->series : run.series;
  std::string points;
  double prev_x = sc.X(static_cast<double>(sim.start.count()));
  for (size_t j = 0; j < series.size(); ++j) {
    const double x = sc.X(static_cast<double>(sim.series_times[j].count()));
    const double y = sc.Y(static_cast<double>(series[j]));
    points += Num(prev_x) + "," + Num(y) + " " + Num(x) + "," + Num(y) + " ";
    prev_x = x;
  }
  if (!points.empty()) points.pop_back();
  out += "<polyline class=\"series" + std::string(leased ? " leases" : "") +
         "\" data-algorithm=\"" + std::string(AlgorithmName(run.algorithm)) +
         "\" fill=\"none\" stroke-linejoin=\"round\" " + StrokeAttrs(st) +
         (leased ? " stroke-dasharray=\"6 3\" stroke-opacity=\"0.8\"" : "") + " points=\"" +
         points + "\"/>\n";
}

std::string LegendTitle(const Simulation& sim) {
  return "most in any " + FormatDuration(sim.window) + " window";
}

std::string LegendEntry(const AlgorithmRun& run, bool leased = false) {
  if (leased) {
    return std::string(AlgorithmName(run.algorithm)) + ", leases  " +
           std::to_string(run.leases->max_in_window);
  }
  return std::string(AlgorithmName(run.algorithm)) + "  " + std::to_string(run.max_in_window);
}

// How wide `s` can be drawn at kFontSize, overestimated: the chart cannot measure the reader's
// font, so every character counts 0.7 em (wider than the average glyph of the common sans-serif
// fonts, bold included; DejaVu Sans averages about 0.52 em over the legend's text) and a space
// 0.35 em.
double TextWidthAtMost(std::string_view s) {
  double em = 0;
  for (const char c : s) {
    if ((static_cast<unsigned char>(c) & 0xC0) == 0x80) continue;  // inside a UTF-8 character
    em += c == ' ' ? 0.35 : 0.7;
  }
  return em * kFontSize;
}

// Where the legend's widest line ends: the canvas reaches at least that far, so a long
// algorithm name beside a large count is never cut at the right edge.
double LegendRight(const Simulation& sim) {
  double right = kLegendKey + TextWidthAtMost(LegendTitle(sim));
  for (const AlgorithmRun& run : sim.runs) {
    right = std::max(right, kLegendText + TextWidthAtMost(LegendEntry(run)));
    if (run.leases) right = std::max(right, kLegendText + TextWidthAtMost(LegendEntry(run, true)));
  }
  return right;
}

void Legend(std::string& out, const Simulation& sim) {
  double y = kTop + 10;
  Text(out, kLegendKey, y, "start", LegendTitle(sim), " font-weight=\"bold\"");
  for (const AlgorithmRun& run : sim.runs) {
    y += 24;
    const Style st = StyleFor(run.algorithm);
    Line(out, kLegendKey, y - 4, kLegendKey + 28, y - 4, StrokeAttrs(st));
    Text(out, kLegendText, y, "start", LegendEntry(run));
    if (!run.leases) continue;
    y += 24;
    Line(out, kLegendKey, y - 4, kLegendKey + 28, y - 4,
         StrokeAttrs(st) + " stroke-dasharray=\"6 3\"");
    Text(out, kLegendText, y, "start", LegendEntry(run, true));
  }
}

}  // namespace

std::string SvgOpening(double width, double height) {
  char size[96];
  std::snprintf(size, sizeof size, "width=\"%.1f\" height=\"%.1f\"", width, height);
  return std::string(
             "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg "
             "xmlns=\"http://www.w3.org/2000/svg\" ") +
         size +
         " font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
         "fill=\"white\"/>\n";
}

std::string XmlEscape(std::string_view s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string RenderSvg(const Simulation& sim, const ChartText& text) {
  int64_t top = 1;
  int64_t limit = 0;
  int64_t bucket_bound = 0;
  for (const AlgorithmRun& r : sim.runs) {
    for (const int64_t v : r.series) top = std::max(top, v);
    if (r.leases) {
      for (const int64_t v : r.leases->series) top = std::max(top, v);
    }
    top = std::max(top, r.bound);
    (IsWindowAlgorithm(r.algorithm) ? limit : bucket_bound) = r.bound;
  }
  const double y_step = NiceStep(static_cast<double>(top) * 1.1 / 6);
  const Scale sc{
      .x_min_us = static_cast<double>(sim.start.count()),
      .x_span_us = static_cast<double>(std::max<int64_t>(sim.end.count() - sim.start.count(), 1)),
      .y_max = std::ceil(static_cast<double>(top) * 1.1 / y_step) * y_step};
  const std::string w = FormatDuration(sim.window);

  const std::string width =
      std::to_string(std::max(kWidth, static_cast<int>(std::ceil(LegendRight(sim) + 16))));
  const std::string height = std::to_string(kHeight);
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + width + "\" height=\"" + height +
         "\" viewBox=\"0 0 " + width + " " + height + "\" font-family=\"sans-serif\" font-size=\"" +
         Num(kFontSize) + "\">\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  Text(out, kLeft, 28, "start", text.title,
       " class=\"title\" font-size=\"17\" font-weight=\"bold\"");
  Text(out, kLeft, 50, "start",
       "Most admitted for one key within the trailing " + w + " window, per algorithm",
       " fill=\"#555555\"");
  Axes(out, sc, UnitFor(static_cast<int64_t>(sc.x_span_us)),
       "admitted in the trailing " + w + " (" + text.y_unit + ")");
  for (const AlgorithmRun& run : sim.runs) {
    Series(out, sc, sim, run);
    if (run.leases) Series(out, sc, sim, run, /*leased=*/true);
  }
  if (limit > 0) Bound(out, sc, limit, "limit " + std::to_string(limit) + " (windows)", "4 4");
  if (bucket_bound > 0) {
    Bound(out, sc, bucket_bound, "B + r·W = " + std::to_string(bucket_bound) + " (buckets)", "1 3");
  }
  Legend(out, sim);
  out += "</svg>\n";
  return out;
}

}  // namespace caudal::simulate

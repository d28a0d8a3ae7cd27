#include "simulate/svg_chart.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <vector>

namespace caudal::simulate {
namespace {

using std::chrono::minutes;
using ::testing::HasSubstr;

struct Element {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::string text;  // direct character data
};

// A minimal XML reader, enough to check the chart: every tag closes in order, attribute values
// are quoted, text has no raw '<' or '&' outside entities. Returns false on the first violation.
bool ParseXml(const std::string& s, std::vector<Element>* out) {
  std::vector<size_t> open;
  size_t i = s.find("<svg");
  if (i == std::string::npos) return false;
  while (i < s.size()) {
    if (s[i] != '<') {
      const size_t lt = s.find('<', i);
      const std::string text = s.substr(i, lt - i);
      for (size_t amp = text.find('&'); amp != std::string::npos; amp = text.find('&', amp + 1)) {
        if (text.find(';', amp) == std::string::npos) return false;
      }
      if (!open.empty()) (*out)[open.back()].text += text;
      if (lt == std::string::npos) break;
      i = lt;
      continue;
    }
    const size_t gt = s.find('>', i);
    if (gt == std::string::npos) return false;
    std::string tag = s.substr(i + 1, gt - i - 1);
    i = gt + 1;
    if (tag[0] == '/') {
      if (open.empty() || (*out)[open.back()].name != tag.substr(1)) return false;
      open.pop_back();
      continue;
    }
    const bool self_closing = tag.back() == '/';
    if (self_closing) tag.pop_back();
    Element e;
    const size_t space = std::min(tag.find(' '), tag.size());
    e.name = tag.substr(0, space);
    const std::string rest = tag.substr(space);
    for (size_t p = 0; (p = rest.find('=', p)) != std::string::npos;) {
      size_t k = p;
      while (k > 0 && rest[k - 1] != ' ') --k;
      if (p + 1 >= rest.size() || rest[p + 1] != '"') return false;
      const size_t close = rest.find('"', p + 2);
      if (close == std::string::npos) return false;
      e.attrs[rest.substr(k, p - k)] = rest.substr(p + 2, close - p - 2);
      p = close + 1;
    }
    out->push_back(e);
    if (!self_closing) open.push_back(out->size() - 1);
  }
  return open.empty();
}

Simulation ChartSample() {
  Simulation sim;
  sim.window = minutes(1);
  sim.start = minutes(0);
  sim.end = minutes(10);
  for (int j = 1; j <= 10; ++j) sim.series_times.push_back(minutes(j));
  sim.runs = {
      {.algorithm = Algorithm::kFixedWindow,
       .offered = 1,
       .admitted = 1,
       .rejected = 0,
       .max_in_window = 200,
       .bound = 100,
       .series = {0, 200, 100, 100, 100, 100, 100, 100, 100, 100}},
      {.algorithm = Algorithm::kGcra,
       .offered = 1,
       .admitted = 1,
       .rejected = 0,
       .max_in_window = 150,
       .bound = 200,
       .series = {0, 100, 150, 100, 100, 100, 100, 100, 100, 100}},
  };
  return sim;
}

TEST(SvgChart, IsWellFormedWithOneLinePerAlgorithmAndBothBounds) {
  const std::string svg = RenderSvg(ChartSample(), {.title = "boundary-burst <&> test"});
  std::vector<Element> elements;
  ASSERT_TRUE(ParseXml(svg, &elements)) << svg;
  ASSERT_FALSE(elements.empty());
  EXPECT_EQ(elements[0].name, "svg");
  EXPECT_EQ(elements[0].attrs["xmlns"], "http://www.w3.org/2000/svg");

  std::vector<std::string> series;
  int bounds = 0;
  std::string texts;
  for (const Element& e : elements) {
    if (e.name == "polyline") {
      series.push_back(e.attrs.at("data-algorithm"));
      // Two points per interval (a step line), each "x,y" inside the canvas.
      std::istringstream pts(e.attrs.at("points"));
      int n = 0;
      double x, y;
      char comma;
      while (pts >> x >> comma >> y) {
        ++n;
        EXPECT_GE(x, 0);
        EXPECT_LE(x, 960);
        EXPECT_GE(y, 0);
        EXPECT_LE(y, 540);
      }
      EXPECT_EQ(n, 20);
    }
    if (e.name == "line" && e.attrs.count("class") && e.attrs.at("class") == "bound") ++bounds;
    if (e.name == "text") texts += e.text + "\n";
  }
  EXPECT_EQ(series, (std::vector<std::string>{"fixed_window", "gcra"}));
  EXPECT_EQ(bounds, 2);
  EXPECT_THAT(texts, HasSubstr("boundary-burst &lt;&amp;&gt; test"));
  EXPECT_THAT(texts, HasSubstr("time since start (min)"));
  EXPECT_THAT(texts, HasSubstr("admitted in the trailing 1m (requests)"));
  EXPECT_THAT(texts, HasSubstr("limit 100 (windows)"));
  EXPECT_THAT(texts, HasSubstr("= 200 (buckets)"));
  EXPECT_THAT(texts, HasSubstr("fixed_window  200"));
  EXPECT_THAT(texts, HasSubstr("gcra  150"));
}

TEST(SvgChart, HigherValuesAreDrawnHigher) {
  const std::string svg = RenderSvg(ChartSample(), {.title = "t"});
  std::vector<Element> elements;
  ASSERT_TRUE(ParseXml(svg, &elements));
  for (const Element& e : elements) {
    if (e.name != "polyline" || e.attrs.at("data-algorithm") != "fixed_window") continue;
    std::istringstream pts(e.attrs.at("points"));
    std::vector<double> ys;
    double x, y;
    char comma;
    while (pts >> x >> comma >> y) ys.push_back(y);
    ASSERT_EQ(ys.size(), 20u);
    EXPECT_LT(ys[2], ys[4]);  // 200 sits above 100 (SVG y grows downwards)
    EXPECT_GT(ys[0], ys[4]);  // 0 sits below 100
  }
}

TEST(SvgChart, XmlEscape) { EXPECT_EQ(XmlEscape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;"); }

// The legend's lines begin right of the plot; the canvas is widened to hold the widest of them
// (a long name beside a count of up to 2^40) even drawn at 0.7 em per character, above what
// common fonts need (tests/serve/test_status_page.py measures the drawn text in Chromium).
TEST(SvgChart, TheCanvasHoldsTheWidestLegend) {
  for (const int64_t most : {int64_t{200}, int64_t{1999}, int64_t{1} << 40}) {
    Simulation sim = ChartSample();
    sim.runs.push_back({.algorithm = Algorithm::kSlidingWindowCounter,
                        .offered = 1,
                        .admitted = 1,
                        .rejected = 0,
                        .max_in_window = most,
                        .bound = 100,
                        .series = std::vector<int64_t>(10, 1)});
    std::vector<Element> elements;
    ASSERT_TRUE(ParseXml(RenderSvg(sim, {.title = "t"}), &elements));
    const double width = std::stod(elements[0].attrs.at("width"));
    EXPECT_EQ(elements[0].attrs.at("viewBox"), "0 0 " + elements[0].attrs.at("width") + " 540");
    EXPECT_GE(width, 960);
    bool found = false;
    for (const Element& e : elements) {
      if (e.name != "text" || e.attrs.at("text-anchor") != "start") continue;
      const double x = std::stod(e.attrs.at("x"));
      const double drawn = 0.7 * 13 * static_cast<double>(e.text.size());
      EXPECT_LE(x + drawn, width) << e.text << " at " << x << " in " << width;
      found |= e.text == "sliding_window_counter  " + std::to_string(most);
    }
    EXPECT_TRUE(found);
  }
  // With room enough (fixed_window and gcra), the canvas keeps its size.
  std::vector<Element> elements;
  ASSERT_TRUE(ParseXml(RenderSvg(ChartSample(), {.title = "t"}), &elements));
  EXPECT_EQ(elements[0].attrs.at("width"), "960");
}

}  // namespace
}  // namespace caudal::simulate

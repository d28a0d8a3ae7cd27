// PrometheusText: the text exposition format 0.0.4, written from kMetricTable's rows. Family()
// writes a row's # HELP and # TYPE lines; the series that follow take their label values in the
// row's order, and the metric's name and label names from the row. Label values are escaped as
// the format wants (backslash, double quote, newline), and so is the help text.
//
// Not thread-safe: one per rendering.
#pragma once

#include <cassert>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "observe/metrics.h"

namespace caudal {

class PrometheusText {
 public:
  explicit PrometheusText(size_t reserve = 4096) { out_.reserve(reserve); }

  // Starts the family of `def`; the series after it are its own.
  void Family(const MetricDef& def);

  // One series of a counter or gauge: `values` are the row's label values, in order.
  void Sample(std::initializer_list<std::string_view> values, uint64_t value) {
    SampleOf(values, value);
  }
  void Sample(const std::vector<std::string>& values, uint64_t value) { SampleOf(values, value); }

  // A histogram's series: a bucket per bound (le, in seconds), then _sum and _count.
  void Histogram(std::initializer_list<std::string_view> values,
                 const LatencyHistogram::Counts& counts);

  std::string Take() && { return std::move(out_); }

 private:
  template <typename Values>
  void SampleOf(const Values& values, uint64_t value) {
    assert(values.size() == def_->LabelCount());
    out_.append(def_->name);
    Labels(values, {});
    Value(value);
  }
  // `{name="value",...}` (nothing without labels), with le="..." last when `le` is given.
  template <typename Values>
  void Labels(const Values& values, std::string_view le) {
    if (values.size() == 0 && le.empty()) return;
    char sep = '{';
    size_t i = 0;
    for (std::string_view v : values) Label(sep, def_->labels[i++], v);
    if (!le.empty()) Label(sep, "le", le);
    out_ += '}';
  }
  void Label(char& sep, std::string_view name, std::string_view value);
  void Value(uint64_t value);

  const MetricDef* def_ = nullptr;
  std::string out_;
};

}  // namespace caudal

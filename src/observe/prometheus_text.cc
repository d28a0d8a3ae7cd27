#include "observe/prometheus_text.h"

#include <charconv>
#include <cstdio>

namespace caudal {
namespace {

// Whole microseconds as seconds with six decimals ("0.000050"), as bounds and sums are written.
std::string_view Seconds(uint64_t us, char (&buf)[32]) {
  const int n =
      std::snprintf(buf, sizeof buf, "%llu.%06llu", static_cast<unsigned long long>(us / 1'000'000),
                    static_cast<unsigned long long>(us % 1'000'000));
  return {buf, static_cast<size_t>(n)};
}

// The text format escapes backslash and newline everywhere, and a double quote in label values.
// Runs without one are appended whole.
void AppendTextEscaped(std::string& out, std::string_view v, bool quote) {
  size_t run = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const char c = v[i];
    if (c != '\\' && c != '\n' && (c != '"' || !quote)) continue;
    out.append(v.substr(run, i - run)).append(1, '\\').append(1, c == '\n' ? 'n' : c);
    run = i + 1;
  }
  out.append(v.substr(run));
}

}  // namespace

void PrometheusText::Family(const MetricDef& def) {
  def_ = &def;
  out_.append("# HELP ").append(def.name).append(" ");
  AppendTextEscaped(out_, def.help, /*quote=*/false);
  out_.append("\n# TYPE ").append(def.name).append(" ").append(MetricTypeName(def.type));
  out_ += '\n';
}

void PrometheusText::Histogram(std::initializer_list<std::string_view> values,
                               const LatencyHistogram::Counts& counts) {
  assert(values.size() == def_->LabelCount());
  char buf[32];
  for (size_t i = 0; i < counts.cumulative.size(); ++i) {
    out_.append(def_->name).append("_bucket");
    const bool inf = i == LatencyHistogram::kBoundsUs.size();
    Labels(values,
           inf ? "+Inf" : Seconds(static_cast<uint64_t>(LatencyHistogram::kBoundsUs[i]), buf));
    Value(counts.cumulative[i]);
  }
  out_.append(def_->name).append("_sum");
  Labels(values, {});
  out_.append(" ").append(Seconds(counts.sum_us, buf)).append("\n");
  out_.append(def_->name).append("_count");
  Labels(values, {});
  Value(counts.cumulative.back());
}

void PrometheusText::Label(char& sep, std::string_view name, std::string_view value) {
  out_.append(1, sep).append(name).append("=\"");
  AppendTextEscaped(out_, value, /*quote=*/true);
  out_ += '"';
  sep = ',';
}

void PrometheusText::Value(uint64_t value) {
  char buf[24];
  const auto end = std::to_chars(buf, buf + sizeof buf, value).ptr;
  out_.append(" ").append(buf, end).append("\n");
}

}  // namespace caudal

// The value of one series in a prometheus::Registry, for tests that check a
// metric without scraping: the first series of family `name` whose labels
// include `labels` (a counter's or gauge's value, a histogram's sample count);
// nullopt when there is none.
#ifndef NORMSWEEP_TESTS_COMMON_METRIC_VALUE_H_
#define NORMSWEEP_TESTS_COMMON_METRIC_VALUE_H_

#include <prometheus/registry.h>

#include <map>
#include <optional>
#include <string>

namespace normsweep::testing {

inline std::optional<double> MetricValue(prometheus::Registry& registry, const std::string& name,
                                         const std::map<std::string, std::string>& labels = {}) {
  for (const prometheus::MetricFamily& family : registry.Collect()) {
    if (family.name != name) continue;
    for (const prometheus::ClientMetric& m : family.metric) {
      size_t matched = 0;
      for (const prometheus::ClientMetric::Label& l : m.label) {
        auto it = labels.find(l.name);
        matched += it != labels.end() && it->second == l.value;
      }
      if (matched != labels.size()) continue;
      switch (family.type) {
        case prometheus::MetricType::Counter: return m.counter.value;
        case prometheus::MetricType::Gauge: return m.gauge.value;
        case prometheus::MetricType::Histogram: return static_cast<double>(m.histogram.sample_count);
        default: return std::nullopt;
      }
    }
  }
  return std::nullopt;
}

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_COMMON_METRIC_VALUE_H_

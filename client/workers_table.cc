#include "client/workers_table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace normsweep::client {

std::string SummariseDevices(const google::protobuf::RepeatedPtrField<std::string>& devices) {
  std::vector<std::pair<std::string, int>> kinds;  // first-seen order
  for (const std::string& d : devices) {
    const std::string kind = d.substr(0, d.find(':'));  // "cuda:1" -> "cuda"
    auto it = std::find_if(kinds.begin(), kinds.end(), [&](const auto& k) { return k.first == kind; });
    if (it == kinds.end()) {
      kinds.emplace_back(kind, 1);
    } else {
      ++it->second;
    }
  }
  if (kinds.empty()) return "-";
  return absl::StrJoin(kinds, ", ", [](std::string* out, const std::pair<std::string, int>& k) {
    absl::StrAppend(out, k.second, " x ", k.first);
  });
}

std::string FormatAge(absl::Duration age) {
  const int64_t s = std::max<int64_t>(0, absl::ToInt64Seconds(age));
  if (s >= 86400) return absl::StrFormat("%dd%02dh ago", s / 86400, (s % 86400) / 3600);
  if (s >= 3600) return absl::StrFormat("%dh%02dm ago", s / 3600, (s % 3600) / 60);
  if (s >= 60) return absl::StrFormat("%dm%02ds ago", s / 60, s % 60);
  return absl::StrFormat("%ds ago", s);
}

std::string RenderWorkersTable(const std::vector<v1::Worker>& workers, absl::Time now) {
  constexpr char kRow[] = "%-6s %-24s %-24s %-18s %-5s %7s  %s\n";
  std::string out = absl::StrFormat(kRow, "id", "name", "host", "devices", "live", "running", "last heartbeat");
  for (const v1::Worker& w : workers) {
    const absl::Time heard = absl::FromUnixSeconds(w.last_heartbeat_at().seconds()) +
                             absl::Nanoseconds(w.last_heartbeat_at().nanos());
    absl::StrAppendFormat(&out, kRow, absl::StrCat(w.id()), w.name().substr(0, 24),
                          w.hostname().empty() ? "-" : w.hostname().substr(0, 24), SummariseDevices(w.devices()),
                          w.superseded_by() != 0 ? absl::StrCat("no, restarted as ", w.superseded_by())
                          : w.live()             ? "yes"
                                                 : "no",
                          absl::StrCat(w.running_trials()),
                          w.has_last_heartbeat_at() ? FormatAge(now - heard) : "never");
  }
  return out;
}

}  // namespace normsweep::client

#include "client/did_you_mean.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/quote.h"

namespace normsweep::client {

int EditDistance(std::string_view a, std::string_view b) {
  // One row of the table at a time: row[j] is the distance between a[0, i)
  // and b[0, j).
  std::vector<int> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diagonal = row[0];
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int above = row[j];
      const bool same = absl::ascii_tolower(static_cast<unsigned char>(a[i - 1])) ==
                        absl::ascii_tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

namespace {

// One of the names begins with the other, and the shorter is no mere letter
// or two: "lr_maximum" for lr_max, "warmup" for warmup_steps.
bool PrefixOfTheOther(std::string_view a, std::string_view b) {
  if (a.size() > b.size()) std::swap(a, b);
  return a.size() >= 3 && absl::StartsWithIgnoreCase(absl::string_view(b.data(), b.size()),
                                                     absl::string_view(a.data(), a.size()));
}

}  // namespace

std::optional<std::string> Closest(std::string_view name, const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  int best_distance = 0;
  for (const std::string& c : candidates) {
    const int d = EditDistance(name, c);
    const int allowed = std::max<int>(2, static_cast<int>(std::max(name.size(), c.size()) / 3));
    if ((d > allowed && !PrefixOfTheOther(name, c)) || (best.has_value() && d >= best_distance)) continue;
    best = c;
    best_distance = d;
  }
  return best;
}

std::vector<std::string> FieldNames(const google::protobuf::Descriptor& message) {
  std::vector<std::string> names;
  for (int i = 0; i < message.field_count(); ++i) names.push_back(message.field(i)->name());
  return names;
}

std::string DidYouMean(std::string_view name, const std::vector<std::string>& candidates) {
  const std::optional<std::string> closest = Closest(name, candidates);
  return closest.has_value() ? absl::StrCat("; did you mean ", QuoteForError(*closest), "?") : "";
}

}  // namespace normsweep::client

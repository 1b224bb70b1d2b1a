// "Did you mean ...?" for a misspelt name: the closest of the names it could
// have been, by edit distance, for errors about unknown fields (sweep files,
// --set) and commands. Pure functions.
#ifndef NORMSWEEP_CLIENT_DID_YOU_MEAN_H_
#define NORMSWEEP_CLIENT_DID_YOU_MEAN_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "google/protobuf/descriptor.h"

namespace normsweep::client {

// Levenshtein distance (insertions, deletions and substitutions each 1),
// ASCII case folded: "Layers" is 0 from "layers".
int EditDistance(std::string_view a, std::string_view b);

// The candidate nearest to name, when it is near enough to be a likely
// misspelling: at most 2 edits, or a third of the longer name's length, or
// one begins with the other (the shorter of 3 characters or more:
// "lr_maximum" for lr_max); the first such candidate on ties. nullopt when
// none is.
std::optional<std::string> Closest(std::string_view name, const std::vector<std::string>& candidates);

// The field names of a message (as in the .proto file).
std::vector<std::string> FieldNames(const google::protobuf::Descriptor& message);

// "; did you mean 'name'?" for the closest candidate, "" when none is close.
std::string DidYouMean(std::string_view name, const std::vector<std::string>& candidates);

}  // namespace normsweep::client

#endif  // NORMSWEEP_CLIENT_DID_YOU_MEAN_H_

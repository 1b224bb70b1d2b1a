// The one protobuf JSON reader and writer: field names as in the .proto
// files (snake_case), one line, and one rule for unknown fields. Every JSON
// form of a schema message (sweep files, trainer configs and events, the
// stored sweep spec) goes through here.
#ifndef NORMSWEEP_PROTO_SCHEMA_JSON_H_
#define NORMSWEEP_PROTO_SCHEMA_JSON_H_

#include <string>

#include "absl/status/status.h"
#include "google/protobuf/message.h"

namespace normsweep::schema {

enum class UnknownFields {
  kReject,  // input a person wrote: a misspelt field is an error
  kIgnore,  // input a newer normsweep may have written (events, stored specs)
};

// One line, snake_case names, no trailing newline.
std::string ToJson(const google::protobuf::Message& message);

// INVALID_ARGUMENT with protobuf's description of what is wrong.
absl::Status FromJson(const std::string& json, UnknownFields unknown, google::protobuf::Message* message);

}  // namespace normsweep::schema

#endif  // NORMSWEEP_PROTO_SCHEMA_JSON_H_

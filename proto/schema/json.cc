#include "proto/schema/json.h"

#include "google/protobuf/util/json_util.h"

namespace normsweep::schema {

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  return out;
}

absl::Status FromJson(const std::string& json, UnknownFields unknown, google::protobuf::Message* message) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = unknown == UnknownFields::kIgnore;
  const auto status = google::protobuf::util::JsonStringToMessage(json, message, options);
  if (!status.ok()) return absl::InvalidArgumentError(std::string(status.message()));
  return absl::OkStatus();
}

}  // namespace normsweep::schema

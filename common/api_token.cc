#include "common/api_token.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace normsweep {
namespace {

constexpr char kHeader[] = "authorization";
constexpr char kBearer[] = "Bearer ";

}  // namespace

absl::StatusOr<std::string> ApiTokenFromEnvironment() {
  if (const char* token = std::getenv("NORMSWEEP_API_TOKEN"); token != nullptr && *token != '\0') {
    return std::string(absl::StripAsciiWhitespace(token));
  }
  const char* file = std::getenv("NORMSWEEP_API_TOKEN_FILE");
  if (file == nullptr || *file == '\0') return std::string();
  std::ifstream in(file);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("NORMSWEEP_API_TOKEN_FILE: cannot read ", file));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string token(absl::StripAsciiWhitespace(ss.str()));
  if (token.empty()) return absl::InvalidArgumentError(absl::StrCat("NORMSWEEP_API_TOKEN_FILE: ", file, " is empty"));
  return token;
}

void AttachApiToken(grpc::ClientContext* ctx, const std::string& token) {
  if (!token.empty()) ctx->AddMetadata(kHeader, absl::StrCat(kBearer, token));
}

}  // namespace normsweep

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

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

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

grpc::Status CheckApiToken(const grpc::ServerContextBase& ctx, const std::string& token) {
  if (token.empty()) return grpc::Status::OK;
  const auto& metadata = ctx.client_metadata();
  const auto it = metadata.find(kHeader);
  if (it == metadata.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "this scheduler requires an API token: set NORMSWEEP_API_TOKEN (authorization: Bearer)");
  }
  const std::string_view value(it->second.data(), it->second.size());
  const std::string expected = absl::StrCat(kBearer, token);
  if (!ConstantTimeEquals(value, expected)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "wrong API token (authorization: Bearer)");
  }
  return grpc::Status::OK;
}

}  // namespace normsweep

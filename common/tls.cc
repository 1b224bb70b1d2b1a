#include "common/tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace normsweep {
namespace {

// Larger than any certificate bundle; a wrong path (a log, a disk image)
// is refused before it is read whole.
constexpr std::streamoff kMaxPemBytes = 1 << 20;

std::string Name(const TlsFile& f, const char* what) {
  return f.from.empty() ? absl::StrCat(what, " ", f.path) : absl::StrCat(f.from, ": ", what, " ", f.path);
}

absl::StatusOr<std::string> ReadPem(const TlsFile& f, const char* what) {
  std::ifstream in(f.path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(Name(f, what), ": cannot read (", std::strerror(errno), ")"));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size > kMaxPemBytes) return absl::InvalidArgumentError(absl::StrCat(Name(f, what), ": larger than 1 MiB"));
  in.seekg(0);
  std::stringstream ss;
  ss << in.rdbuf();
  if (ss.str().empty()) return absl::InvalidArgumentError(absl::StrCat(Name(f, what), ": empty"));
  return ss.str();
}

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
using Cert = std::unique_ptr<X509, X509Free>;
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;

Bio MemoryBio(const std::string& pem) { return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()))); }

// The first certificate of a PEM file (the leaf of a chain), after checking
// that every block in it parses. OpenSSL's error queue is cleared: its
// entries would otherwise surface in gRPC's own handshake errors.
absl::StatusOr<Cert> ParseCertificates(const std::string& pem, const TlsFile& f, const char* what) {
  Bio bio = MemoryBio(pem);
  Cert first;
  int count = 0;
  while (Cert c{PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)}) {
    if (count++ == 0) first = std::move(c);
  }
  // Reading stops at the end (PEM_R_NO_START_LINE) or at a broken block.
  const unsigned long err = ERR_peek_last_error();
  ERR_clear_error();
  const bool at_end = ERR_GET_LIB(err) == ERR_LIB_PEM && ERR_GET_REASON(err) == PEM_R_NO_START_LINE;
  if (count == 0) return absl::InvalidArgumentError(absl::StrCat(Name(f, what), ": no PEM certificate in it"));
  if (err != 0 && !at_end) {
    return absl::InvalidArgumentError(absl::StrCat(Name(f, what), ": certificate ", count + 1, " does not parse"));
  }
  return first;
}

int NoPassphrase(char*, int, int, void*) { return -1; }

absl::StatusOr<Key> ParseKey(const std::string& pem, const TlsFile& f) {
  Bio bio = MemoryBio(pem);
  Key key(PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr));
  ERR_clear_error();
  if (key == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(f, "private key"), ": no unencrypted PEM private key in it (an encrypted key is not supported)"));
  }
  return key;
}

// Reads a certificate chain and its key and checks that they belong together.
absl::Status ReadCertAndKey(const TlsFile& cert_file, const TlsFile& key_file, std::string* cert_pem,
                            std::string* key_pem) {
  ASSIGN_OR_RETURN(*cert_pem, ReadPem(cert_file, "certificate"));
  ASSIGN_OR_RETURN(Cert cert, ParseCertificates(*cert_pem, cert_file, "certificate"));
  ASSIGN_OR_RETURN(*key_pem, ReadPem(key_file, "private key"));
  ASSIGN_OR_RETURN(Key key, ParseKey(*key_pem, key_file));
  const int matches = X509_check_private_key(cert.get(), key.get());
  ERR_clear_error();
  if (matches != 1) {
    return absl::InvalidArgumentError(absl::StrCat(Name(key_file, "private key"), " is not the key of ",
                                                   Name(cert_file, "certificate")));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadCa(const TlsFile& f) {
  ASSIGN_OR_RETURN(std::string pem, ReadPem(f, "CA certificate"));
  ASSIGN_OR_RETURN(Cert ignored, ParseCertificates(pem, f, "CA certificate"));
  return pem;
}

void FromEnvironment(TlsFile& f, const char* variable, const char* value) {
  if (f.given() || value == nullptr || *value == '\0') return;
  f = TlsFile{value, variable};
}

std::string Paths(std::initializer_list<std::pair<const char*, const TlsFile*>> files) {
  std::string out;
  for (const auto& [label, f] : files) {
    if (!f->given()) continue;
    absl::StrAppend(&out, out.empty() ? "" : ", ", label, " ", f->path);
  }
  return out;
}

}  // namespace

TlsServerOptions TlsServerOptionsWithEnvironment(TlsServerOptions options) {
  FromEnvironment(options.cert, "NORMSWEEP_TLS_CERT", std::getenv("NORMSWEEP_TLS_CERT"));
  FromEnvironment(options.key, "NORMSWEEP_TLS_KEY", std::getenv("NORMSWEEP_TLS_KEY"));
  FromEnvironment(options.client_ca, "NORMSWEEP_TLS_CLIENT_CA", std::getenv("NORMSWEEP_TLS_CLIENT_CA"));
  return options;
}

TlsClientOptions TlsClientOptionsWithEnvironment(TlsClientOptions options) {
  FromEnvironment(options.ca, "NORMSWEEP_TLS_CA", std::getenv("NORMSWEEP_TLS_CA"));
  FromEnvironment(options.cert, "NORMSWEEP_TLS_CERT", std::getenv("NORMSWEEP_TLS_CERT"));
  FromEnvironment(options.key, "NORMSWEEP_TLS_KEY", std::getenv("NORMSWEEP_TLS_KEY"));
  return options;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const TlsServerOptions& options) {
  if (!options.enabled()) return grpc::InsecureServerCredentials();
  if (!options.cert.given() || !options.key.given()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TLS needs both a certificate and its private key (--tls-cert and --tls-key, or NORMSWEEP_TLS_CERT and "
        "NORMSWEEP_TLS_KEY); given: ",
        Paths({{"certificate", &options.cert}, {"key", &options.key}, {"client CA", &options.client_ca}})));
  }
  grpc::SslServerCredentialsOptions ssl(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  RETURN_IF_ERROR(ReadCertAndKey(options.cert, options.key, &pair.cert_chain, &pair.private_key));
  ssl.pem_key_cert_pairs.push_back(std::move(pair));
  if (options.client_ca.given()) {
    ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadCa(options.client_ca));
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::SslServerCredentials(ssl);
  if (credentials == nullptr) return absl::InternalError("gRPC could not make TLS server credentials");
  return credentials;
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(const TlsClientOptions& options) {
  if (!options.enabled()) return grpc::InsecureChannelCredentials();
  if (!options.ca.given()) {
    return absl::InvalidArgumentError(
        "TLS needs the CA that signed the scheduler's certificate (--tls-ca or NORMSWEEP_TLS_CA)");
  }
  if (options.cert.given() != options.key.given()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a client certificate needs its private key and the other way round (--tls-cert and --tls-key, or "
        "NORMSWEEP_TLS_CERT and NORMSWEEP_TLS_KEY); given: ",
        Paths({{"certificate", &options.cert}, {"key", &options.key}})));
  }
  grpc::SslCredentialsOptions ssl;
  ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadCa(options.ca));
  if (options.cert.given()) {
    RETURN_IF_ERROR(ReadCertAndKey(options.cert, options.key, &ssl.pem_cert_chain, &ssl.pem_private_key));
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::SslCredentials(ssl);
  if (credentials == nullptr) return absl::InternalError("gRPC could not make TLS channel credentials");
  return credentials;
}

std::string DescribeTls(const TlsServerOptions& options) {
  if (!options.enabled()) return "plaintext";
  return absl::StrCat(options.client_ca.given() ? "mutual TLS (" : "TLS (",
                      Paths({{"certificate", &options.cert}, {"key", &options.key}, {"client CA", &options.client_ca}}),
                      ")");
}

std::string DescribeTls(const TlsClientOptions& options) {
  if (!options.enabled()) return "plaintext";
  return absl::StrCat(options.cert.given() ? "mutual TLS (" : "TLS (",
                      Paths({{"CA", &options.ca}, {"certificate", &options.cert}, {"key", &options.key}}), ")");
}

}  // namespace normsweep

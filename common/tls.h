// TLS on the scheduler's gRPC port: gRPC's own SSL credentials (Debian's
// gRPC runs them on OpenSSL). The scheduler presents a certificate and, when
// given a client CA, requires and verifies one from every client (mutual
// TLS); the worker and the CLI verify the scheduler's certificate against a
// CA file and present their own certificate when given one. Without TLS
// settings everything stays plaintext, as before.
//
// Paths come from flags or from the NORMSWEEP_TLS_* environment variables
// (Kubernetes Secrets and systemd credentials are files). Errors name the
// flag or variable and the path, never a file's contents; the PEM text lives
// only in the returned credentials.
#ifndef NORMSWEEP_COMMON_TLS_H_
#define NORMSWEEP_COMMON_TLS_H_

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace normsweep {

// A PEM file and where its path came from ("--tls-cert", "NORMSWEEP_TLS_CERT"),
// for error messages. An empty path: not given.
struct TlsFile {
  std::string path;
  std::string from;
  bool given() const { return !path.empty(); }
};

// The scheduler's side. TLS is on when cert is given (key must be too);
// client_ca turns on mutual TLS.
struct TlsServerOptions {
  TlsFile cert;       // the scheduler's certificate chain, leaf first
  TlsFile key;        // its private key (unencrypted PEM)
  TlsFile client_ca;  // CA(s) whose client certificates are accepted
  bool enabled() const { return cert.given() || key.given() || client_ca.given(); }
};

// The worker's and the CLI's side. TLS is on when any file is given; ca is
// then required (the scheduler is verified against it, never against a
// built-in list). The scheduler's certificate must name the host of the
// address the client dials (a DNS name or IP address in subjectAltName).
struct TlsClientOptions {
  TlsFile ca;    // CA(s) that signed the scheduler's certificate
  TlsFile cert;  // this client's certificate, for a scheduler that requires one
  TlsFile key;   // its private key
  bool enabled() const { return ca.given() || cert.given() || key.given(); }
};

// Fills what the flags left empty from NORMSWEEP_TLS_CERT, NORMSWEEP_TLS_KEY
// and NORMSWEEP_TLS_CLIENT_CA.
TlsServerOptions TlsServerOptionsWithEnvironment(TlsServerOptions options);
// Fills what the flags left empty from NORMSWEEP_TLS_CA, NORMSWEEP_TLS_CERT
// and NORMSWEEP_TLS_KEY.
TlsClientOptions TlsClientOptionsWithEnvironment(TlsClientOptions options);

// Reads and checks the files (each one readable PEM, the key the
// certificate's) and builds the credentials; insecure ones when TLS is off.
// INVALID_ARGUMENT naming the flag or variable and the path otherwise.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const TlsServerOptions& options);
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(const TlsClientOptions& options);

// One line for the start-up log: "plaintext", "TLS (cert PATH, key PATH)",
// "mutual TLS (...)". Paths only.
std::string DescribeTls(const TlsServerOptions& options);
std::string DescribeTls(const TlsClientOptions& options);

}  // namespace normsweep

#endif  // NORMSWEEP_COMMON_TLS_H_

#include "tests/common/test_certificates.h"

#include "absl/strings/str_cat.h"
#include "tests/common/subprocess.h"

namespace normsweep::testing {

absl::StatusOr<TestCertificates> MakeTestCertificates(const std::string& dir) {
  // One shell script: a CA per name, then certificates signed by them.
  constexpr char kScript[] = R"sh(set -eu
key="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
ca() { openssl req -x509 $key -keyout "$1.key" -out "$1.pem" -days 2 -subj "/CN=normsweep test $1"; }
# leaf NAME CA EXTENSIONS
leaf() {
  openssl req $key -keyout "$1.key" -out "$1.csr" -subj "/CN=normsweep test $1"
  printf '%b' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -set_serial "0x$(openssl rand -hex 8)" -days 2 \
    -extfile "$1.ext" -out "$1.pem"
  rm "$1.csr" "$1.ext"
}
ca ca
ca other-ca
leaf server ca 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n'
leaf client ca 'extendedKeyUsage=clientAuth\n'
leaf other-client other-ca 'extendedKeyUsage=clientAuth\n'
)sh";
  const std::string log = dir + "/openssl.log";
  absl::StatusOr<Subprocess> sh =
      Subprocess::Start({"/bin/sh", "-c", absl::StrCat("cd '", dir, "' && ", kScript)}, {}, log);
  if (!sh.ok()) return sh.status();
  const int code = sh->Wait(60);
  if (code != 0) {
    return absl::InternalError(absl::StrCat("openssl could not make the test certificates (exit ", code, "; see ",
                                            log, "; Debian package openssl)"));
  }
  TestCertificates c;
  c.ca = dir + "/ca.pem";
  c.server_cert = dir + "/server.pem";
  c.server_key = dir + "/server.key";
  c.client_cert = dir + "/client.pem";
  c.client_key = dir + "/client.key";
  c.other_ca = dir + "/other-ca.pem";
  c.other_client_cert = dir + "/other-client.pem";
  c.other_client_key = dir + "/other-client.key";
  return c;
}

}  // namespace normsweep::testing

// common/tls.h without a network: which files make credentials, which are
// refused and how the refusal reads (the flag or variable and the path,
// never the file's contents), and the environment's part.
#include "common/tls.h"

#include <stdlib.h>

#include <cstdio>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/certificates_test.h"

namespace normsweep {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

class TlsOptionsTest : public testing::CertificatesTest {
 protected:
  void SetUp() override {
    for (const char* v : {"NORMSWEEP_TLS_CERT", "NORMSWEEP_TLS_KEY", "NORMSWEEP_TLS_CLIENT_CA", "NORMSWEEP_TLS_CA"}) {
      unsetenv(v);
    }
  }

  static std::string Write(const std::string& name, const std::string& text) {
    const std::string path = *dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  static TlsServerOptions Server(const std::string& cert, const std::string& key, const std::string& client_ca = "") {
    TlsServerOptions o;
    o.cert = {cert, "--tls_cert"};
    o.key = {key, "--tls_key"};
    o.client_ca = {client_ca, "--tls_client_ca"};
    return o;
  }
};

TEST_F(TlsOptionsTest, NoFilesMeansPlaintext) {
  EXPECT_FALSE(TlsServerOptions().enabled());
  EXPECT_FALSE(TlsClientOptions().enabled());
  auto server = MakeServerCredentials({});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_NE(*server, nullptr);
  auto client = MakeChannelCredentials({});
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_NE(*client, nullptr);
  EXPECT_EQ(DescribeTls(TlsServerOptions()), "plaintext");
}

TEST_F(TlsOptionsTest, GoodFilesMakeCredentials) {
  auto server = MakeServerCredentials(Server(certs_->server_cert, certs_->server_key));
  ASSERT_TRUE(server.ok()) << server.status();
  auto mutual = MakeServerCredentials(Server(certs_->server_cert, certs_->server_key, certs_->ca));
  ASSERT_TRUE(mutual.ok()) << mutual.status();
  EXPECT_EQ(DescribeTls(Server(certs_->server_cert, certs_->server_key, certs_->ca)),
            "mutual TLS (certificate " + certs_->server_cert + ", key " + certs_->server_key + ", client CA " +
                certs_->ca + ")");

  TlsClientOptions client;
  client.ca = {certs_->ca, "--tls-ca"};
  ASSERT_TRUE(MakeChannelCredentials(client).ok());
  client.cert = {certs_->client_cert, "--tls-cert"};
  client.key = {certs_->client_key, "--tls-key"};
  auto with_cert = MakeChannelCredentials(client);
  ASSERT_TRUE(with_cert.ok()) << with_cert.status();
}

TEST_F(TlsOptionsTest, ErrorsNameTheFlagAndThePathButNeverTheContents) {
  // A missing file.
  auto missing = MakeServerCredentials(Server(*dir_ + "/nope.pem", certs_->server_key));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(),
              AllOf(HasSubstr("--tls_cert"), HasSubstr(*dir_ + "/nope.pem"), HasSubstr("cannot read")));

  // Not PEM: refused without quoting it.
  const std::string junk = Write("junk.pem", "this is a secret, not a certificate\n");
  auto not_pem = MakeServerCredentials(Server(junk, certs_->server_key));
  EXPECT_THAT(not_pem.status().message(),
              AllOf(HasSubstr("--tls_cert"), HasSubstr(junk), HasSubstr("no PEM certificate"), Not(HasSubstr("secret"))));

  // A private key given as the certificate: its text never shows.
  auto key_as_cert = MakeServerCredentials(Server(certs_->server_key, certs_->server_key));
  EXPECT_THAT(key_as_cert.status().message(), AllOf(HasSubstr("no PEM certificate"), Not(HasSubstr("BEGIN"))));

  // A certificate given as the key.
  auto cert_as_key = MakeServerCredentials(Server(certs_->server_cert, certs_->server_cert));
  EXPECT_THAT(cert_as_key.status().message(), AllOf(HasSubstr("--tls_key"), HasSubstr("no unencrypted PEM private key")));

  // The key of another certificate.
  auto mismatch = MakeServerCredentials(Server(certs_->server_cert, certs_->client_key));
  EXPECT_THAT(mismatch.status().message(),
              AllOf(HasSubstr("--tls_key"), HasSubstr(certs_->client_key), HasSubstr("is not the key of"),
                    HasSubstr(certs_->server_cert)));

  // A broken client CA file.
  auto bad_ca = MakeServerCredentials(Server(certs_->server_cert, certs_->server_key, junk));
  EXPECT_THAT(bad_ca.status().message(), AllOf(HasSubstr("--tls_client_ca"), HasSubstr("CA certificate")));

  // Empty.
  const std::string empty = Write("empty.pem", "");
  EXPECT_THAT(MakeServerCredentials(Server(empty, certs_->server_key)).status().message(), HasSubstr("empty"));
}

TEST_F(TlsOptionsTest, IncompleteSettingsAreRefused) {
  auto cert_only = MakeServerCredentials(Server(certs_->server_cert, ""));
  EXPECT_EQ(cert_only.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(cert_only.status().message(), HasSubstr("both a certificate and its private key"));
  auto ca_only = MakeServerCredentials(Server("", "", certs_->ca));
  EXPECT_THAT(ca_only.status().message(), HasSubstr("both a certificate and its private key"));

  TlsClientOptions no_ca;
  no_ca.cert = {certs_->client_cert, "--tls-cert"};
  no_ca.key = {certs_->client_key, "--tls-key"};
  EXPECT_THAT(MakeChannelCredentials(no_ca).status().message(), HasSubstr("--tls-ca"));
  TlsClientOptions no_key;
  no_key.ca = {certs_->ca, "--tls-ca"};
  no_key.cert = {certs_->client_cert, "--tls-cert"};
  EXPECT_THAT(MakeChannelCredentials(no_key).status().message(), HasSubstr("needs its private key"));
}

TEST_F(TlsOptionsTest, TheEnvironmentFillsWhatFlagsLeaveEmpty) {
  setenv("NORMSWEEP_TLS_CERT", certs_->server_cert.c_str(), 1);
  setenv("NORMSWEEP_TLS_KEY", certs_->server_key.c_str(), 1);
  setenv("NORMSWEEP_TLS_CLIENT_CA", certs_->ca.c_str(), 1);
  setenv("NORMSWEEP_TLS_CA", certs_->ca.c_str(), 1);
  const TlsServerOptions server = TlsServerOptionsWithEnvironment({});
  EXPECT_EQ(server.cert.path, certs_->server_cert);
  EXPECT_EQ(server.cert.from, "NORMSWEEP_TLS_CERT");
  EXPECT_EQ(server.client_ca.path, certs_->ca);
  EXPECT_TRUE(MakeServerCredentials(server).ok());

  // A flag wins over the variable.
  TlsServerOptions flags;
  flags.key = {certs_->client_key, "--tls_key"};
  const TlsServerOptions mixed = TlsServerOptionsWithEnvironment(flags);
  EXPECT_EQ(mixed.key.path, certs_->client_key);
  EXPECT_THAT(MakeServerCredentials(mixed).status().message(), HasSubstr("--tls_key"));

  const TlsClientOptions client = TlsClientOptionsWithEnvironment({});
  EXPECT_EQ(client.ca.path, certs_->ca);
  EXPECT_EQ(client.ca.from, "NORMSWEEP_TLS_CA");
  // NORMSWEEP_TLS_CERT/KEY name this process's own certificate: the server's here.
  EXPECT_EQ(client.cert.path, certs_->server_cert);

  // A variable naming a missing file is reported under its name.
  setenv("NORMSWEEP_TLS_CA", "/nonexistent/ca.pem", 1);
  unsetenv("NORMSWEEP_TLS_CERT");
  unsetenv("NORMSWEEP_TLS_KEY");
  EXPECT_THAT(MakeChannelCredentials(TlsClientOptionsWithEnvironment({})).status().message(),
              AllOf(HasSubstr("NORMSWEEP_TLS_CA"), HasSubstr("/nonexistent/ca.pem")));
}

}  // namespace
}  // namespace normsweep

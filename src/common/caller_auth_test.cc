#include "common/caller_auth.h"

#include <gtest/gtest.h>

namespace caudal {
namespace {

const std::vector<std::string> kNone;

TEST(ConstantTimeEquals, ComparesEveryByteAndTheLength) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("s3cret", "s3cret"));
  EXPECT_FALSE(ConstantTimeEquals("s3cret", "s3creT"));
  EXPECT_FALSE(ConstantTimeEquals("s3cret", "s3cre"));
  EXPECT_FALSE(ConstantTimeEquals("s3cre", "s3cret"));
  EXPECT_FALSE(ConstantTimeEquals(std::string_view("a\0", 2), "a"));
}

TEST(CheckCaller, NothingConfiguredLetsEveryoneIn) {
  EXPECT_EQ(CheckCaller({}, "", kNone), CallerVerdict::kAllowed);
  EXPECT_EQ(CheckCaller({}, "Bearer whatever", kNone), CallerVerdict::kAllowed);
}

TEST(CheckCaller, TokenIsABearerCredential) {
  const CallerAuth auth{.token = "t0ken"};
  EXPECT_EQ(CheckCaller(auth, "Bearer t0ken", kNone), CallerVerdict::kAllowed);
  EXPECT_EQ(CheckCaller(auth, "bearer  t0ken ", kNone), CallerVerdict::kAllowed);
  EXPECT_EQ(CheckCaller(auth, "", kNone), CallerVerdict::kNoCredentials);
  EXPECT_EQ(CheckCaller(auth, "Bearer t0ke", kNone), CallerVerdict::kBadToken);
  EXPECT_EQ(CheckCaller(auth, "Bearer ", kNone), CallerVerdict::kBadToken);
  EXPECT_EQ(CheckCaller(auth, "Basic dDBrZW4=", kNone), CallerVerdict::kBadToken);
  EXPECT_EQ(CheckCaller(auth, "t0ken", kNone), CallerVerdict::kBadToken);
  // A certificate is no use when no identity is allowed.
  const std::vector<std::string> ids = {"envoy"};
  EXPECT_EQ(CheckCaller(auth, "", ids), CallerVerdict::kNoCredentials);
}

TEST(CheckCaller, IdentitiesMatchExactlyAnyOfTheCertificates) {
  const CallerAuth auth{.allowed = {"envoy", "spiffe://mesh/edge"}};
  const std::vector<std::string> envoy = {"edge-7", "spiffe://mesh/edge"};
  const std::vector<std::string> other = {"Envoy", "envoy.example"};
  EXPECT_EQ(CheckCaller(auth, "", envoy), CallerVerdict::kAllowed);
  EXPECT_EQ(CheckCaller(auth, "", other), CallerVerdict::kNotAllowed);
  EXPECT_EQ(CheckCaller(auth, "", kNone), CallerVerdict::kNoCredentials);
}

TEST(CheckCaller, EitherCredentialSuffices) {
  const CallerAuth auth{.token = "t0ken", .allowed = {"envoy"}};
  const std::vector<std::string> envoy = {"envoy"};
  const std::vector<std::string> other = {"other"};
  EXPECT_EQ(CheckCaller(auth, "Bearer t0ken", other), CallerVerdict::kAllowed);
  EXPECT_EQ(CheckCaller(auth, "Bearer wrong", envoy), CallerVerdict::kAllowed);
  EXPECT_EQ(CheckCaller(auth, "Bearer wrong", other), CallerVerdict::kBadToken);
  EXPECT_EQ(CheckCaller(auth, "", other), CallerVerdict::kNotAllowed);
}

}  // namespace
}  // namespace caudal

// The generated messages must put every field on the wire where Envoy's published API puts it;
// the expected bytes below are spelled out from the field numbers and wire types of that API.
#include <gtest/gtest.h>

#include <string>

#include "envoy/service/ratelimit/v3/rls.pb.h"

namespace caudal::envoy {
namespace {

using ::envoy::service::ratelimit::v3::RateLimitRequest;
using ::envoy::service::ratelimit::v3::RateLimitResponse;

std::string Bytes(std::initializer_list<int> bytes) {
  std::string s;
  for (int b : bytes) s.push_back(static_cast<char>(b));
  return s;
}

TEST(ProtoWire, RequestFieldsMatchTheEnvoyApi) {
  RateLimitRequest req;
  req.set_domain("d");              // 1: string
  auto* d = req.add_descriptors();  // 2: RateLimitDescriptor
  auto* e = d->add_entries();       //   1: Entry{key=1, value=2}
  e->set_key("k");
  e->set_value("v");
  d->mutable_hits_addend()->set_value(5);             //   3: UInt64Value{value=1}
  d->set_is_negative_hits(true);                      //   4: bool
  req.set_hits_addend(2);                             // 3: uint32
  const std::string expected = Bytes({0x0a, 1,  'd',  //
                                      0x12, 14,       //
                                      0x0a, 6,  0x0a, 1, 'k', 0x12, 1, 'v',  //
                                      0x1a, 2,  0x08, 5,                     //
                                      0x20, 1,                               //
                                      0x18, 2});
  EXPECT_EQ(req.SerializeAsString(), expected);

  RateLimitRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(expected));
  EXPECT_EQ(parsed.descriptors(0).hits_addend().value(), 5u);
  EXPECT_TRUE(parsed.descriptors(0).is_negative_hits());
}

TEST(ProtoWire, LimitOverrideFieldsMatchTheEnvoyApi) {
  RateLimitRequest req;
  auto* limit = req.add_descriptors()->mutable_limit();  // 2: RateLimitOverride
  limit->set_requests_per_unit(300);                     //   1: uint32
  limit->set_unit(::envoy::type::v3::MINUTE);            //   2: RateLimitUnit (MINUTE = 2)
  EXPECT_EQ(req.SerializeAsString(), Bytes({0x12, 7, 0x12, 5, 0x08, 0xac, 0x02, 0x10, 2}));
}

TEST(ProtoWire, ResponseFieldsMatchTheEnvoyApi) {
  RateLimitResponse resp;
  resp.set_overall_code(RateLimitResponse::OVER_LIMIT);   // 1: Code (OVER_LIMIT = 2)
  auto* s = resp.add_statuses();                          // 2: DescriptorStatus
  s->set_code(RateLimitResponse::OVER_LIMIT);             //   1: Code
  s->mutable_current_limit()->set_requests_per_unit(10);  //   2: RateLimit{rpu=1, unit=2, name=3}
  s->mutable_current_limit()->set_unit(RateLimitResponse::RateLimit::HOUR);
  s->mutable_current_limit()->set_name("n");
  s->set_limit_remaining(5);                          //   3: uint32
  s->mutable_duration_until_reset()->set_seconds(7);  //   4: Duration{seconds=1}
  auto* h = resp.add_response_headers_to_add();       // 3: HeaderValue{key=1, value=2}
  h->set_key("h");
  h->set_value("x");
  auto* r = resp.add_request_headers_to_add();  // 4: HeaderValue
  r->set_key("q");
  const std::string expected = Bytes({0x08, 2,                                         //
                                      0x12, 17,                                        //
                                      0x08, 2,                                         //
                                      0x12, 7,  0x08, 10, 0x10, 3,    0x1a, 1,   'n',  //
                                      0x18, 5,                                         //
                                      0x22, 2,  0x08, 7,                               //
                                      0x1a, 6,  0x0a, 1,  'h',  0x12, 1,    'x',       //
                                      0x22, 3,  0x0a, 1,  'q'});
  EXPECT_EQ(resp.SerializeAsString(), expected);
}

}  // namespace
}  // namespace caudal::envoy

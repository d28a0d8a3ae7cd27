// Fuzzer for IP address and CIDR block parsing (X-Forwarded-For hops, `ip` descriptors and
// trusted_proxies entries are untrusted text).
//
// Whatever parses formats back to text that parses to the same value; a masked address stays in
// every block that contained it; a block contains its own network and exactly the addresses
// whose masked form is that network. Refusals are kInvalidArgument. Never a crash or an overflow.
#include <cstdint>
#include <string_view>

#include "caudal/engine/ip.h"
#include "fuzz_check.h"

namespace caudal {
namespace {

void CheckAddress(const IpAddress& a) {
  const Result<IpAddress> again = IpAddress::Parse(a.ToString());
  FUZZ_CHECK(again.ok() && *again == a);
  for (int prefix : {0, 1, 7, 8, 24, 31, 32, 48, 64, 127, 128}) {
    const IpAddress m = a.Masked(prefix);
    FUZZ_CHECK(m.family == a.family);
    FUZZ_CHECK(m.Masked(prefix) == m);
    if (prefix >= a.Bits()) FUZZ_CHECK(m == a);
    const Result<CidrBlock> block = CidrBlock::Parse(m.ToString() + "/" + std::to_string(prefix));
    if (prefix > a.Bits()) {
      FUZZ_CHECK(!block.ok());
      continue;
    }
    FUZZ_CHECK(block.ok() && block->network == m && block->prefix == prefix);
    FUZZ_CHECK(block->Contains(a));
  }
}

void Run(std::string_view text) {
  const Result<IpAddress> a = IpAddress::Parse(text);
  if (a.ok()) {
    FUZZ_CHECK(text.find('\0') == std::string_view::npos);  // no text hidden after a NUL
    CheckAddress(*a);
  } else {
    FUZZ_CHECK(a.status().code() == StatusCode::kInvalidArgument);
  }
  const Result<CidrBlock> b = CidrBlock::Parse(text);
  if (!b.ok()) {
    FUZZ_CHECK(b.status().code() == StatusCode::kInvalidArgument);
    return;
  }
  FUZZ_CHECK(b->prefix >= 0 && b->prefix <= b->network.Bits());
  FUZZ_CHECK(b->network.Masked(b->prefix) == b->network);
  FUZZ_CHECK(b->Contains(b->network));
  const Result<CidrBlock> again = CidrBlock::Parse(b->ToString());
  FUZZ_CHECK(again.ok() && *again == *b);
  if (a.ok()) FUZZ_CHECK(b->Contains(*a) && b->prefix == a->Bits());
}

}  // namespace
}  // namespace caudal

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  caudal::Run(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}

#include "caudal/engine/ip.h"

#include <arpa/inet.h>

#include <cstring>

#include "common/cat.h"

namespace caudal {
namespace {

constexpr std::array<uint8_t, 12> kV4MappedPrefix = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

}  // namespace

Result<IpAddress> IpAddress::Parse(std::string_view text) {
  // INET6_ADDRSTRLEN is 46; anything longer is not an address. inet_pton reads up to a NUL, so
  // one inside the text would hide what follows it.
  if (text.empty() || text.size() >= 46 || text.find('\0') != std::string_view::npos) {
    return Status::InvalidArgument(Cat(Quoted(text.substr(0, 64)), " is not an IP address"));
  }
  char buf[46];
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  IpAddress a;
  if (inet_pton(AF_INET, buf, a.bytes.data()) == 1) {
    a.family = IpFamily::kV4;
    return a;
  }
  if (inet_pton(AF_INET6, buf, a.bytes.data()) == 1) {
    a.family = IpFamily::kV6;
    if (std::memcmp(a.bytes.data(), kV4MappedPrefix.data(), kV4MappedPrefix.size()) == 0) {
      IpAddress v4;
      v4.family = IpFamily::kV4;
      std::memcpy(v4.bytes.data(), a.bytes.data() + 12, 4);
      return v4;
    }
    return a;
  }
  return Status::InvalidArgument(Cat(Quoted(text), " is not an IP address"));
}

IpAddress IpAddress::Masked(int prefix) const {
  IpAddress out = *this;
  const int bits = Bits();
  if (prefix < 0) prefix = 0;
  if (prefix >= bits) return out;
  const int nbytes = bits / 8;
  const int full = prefix / 8;
  const int rest = prefix % 8;
  if (full < nbytes) {
    out.bytes[static_cast<size_t>(full)] &= static_cast<uint8_t>(0xff00 >> rest);
    for (int i = full + 1; i < nbytes; ++i) out.bytes[static_cast<size_t>(i)] = 0;
  }
  return out;
}

std::string IpAddress::ToString() const {
  if (family == IpFamily::kV4) {  // on every forward-auth request: skip inet_ntop's sprintf
    std::string out;              // at most 15 characters: no allocation
    for (size_t i = 0; i < 4; ++i) {
      if (i > 0) out += '.';
      const unsigned b = bytes[i];
      if (b >= 100) out += static_cast<char>('0' + b / 100);
      if (b >= 10) out += static_cast<char>('0' + b / 10 % 10);
      out += static_cast<char>('0' + b % 10);
    }
    return out;
  }
  char buf[64];
  const int af = family == IpFamily::kV4 ? AF_INET : AF_INET6;
  if (inet_ntop(af, bytes.data(), buf, sizeof buf) == nullptr) return "?";
  return buf;
}

Result<CidrBlock> CidrBlock::Parse(std::string_view text) {
  const size_t slash = text.find('/');
  auto addr = IpAddress::Parse(text.substr(0, slash));
  if (!addr.ok()) {
    return Status::InvalidArgument(
        Cat(Quoted(text), " is not a CIDR block (expected e.g. 10.0.0.0/8 or ::1/128)"));
  }
  CidrBlock block{.network = *addr, .prefix = addr->Bits()};
  if (slash != std::string_view::npos) {
    const std::string_view p = text.substr(slash + 1);
    int prefix = -1;
    const auto [ptr, ec] = std::from_chars(p.data(), p.data() + p.size(), prefix);
    if (ec != std::errc() || ptr != p.data() + p.size() || prefix < 0 || prefix > addr->Bits()) {
      return Status::InvalidArgument(
          Cat(Quoted(text), ": prefix length must be 0..", addr->Bits()));
    }
    block.prefix = prefix;
  }
  if (!(block.network.Masked(block.prefix) == block.network)) {
    return Status::InvalidArgument(Cat(Quoted(text), " has host bits set (did you mean ",
                                       block.network.Masked(block.prefix).ToString(), '/',
                                       block.prefix, "?)"));
  }
  return block;
}

bool CidrBlock::Contains(const IpAddress& a) const {
  return a.family == network.family && a.Masked(prefix) == network;
}

std::string CidrBlock::ToString() const { return Cat(network.ToString(), '/', prefix); }

}  // namespace caudal

#include "config/lease_rows.h"

#include <charconv>
#include <string>

#include "common/cat.h"

namespace caudal::config_internal {

Result<int64_t> ParseShare(std::string_view text) {
  const Status bad = Status::InvalidArgument(
      Cat("expected a share above 0 and at most 1 such as 0.1, at most 6 decimals (got ",
          Quoted(text), ')'));
  const size_t dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  const std::string_view decimals = dot == text.npos ? std::string_view() : text.substr(dot + 1);
  if (whole.empty() || whole.size() > 1 || decimals.size() > 6 ||
      (dot != text.npos && decimals.empty())) {
    return bad;
  }
  int64_t ppm = 0;
  for (char c : whole) {
    if (c < '0' || c > '9') return bad;
    ppm = (c - '0') * 1'000'000;
  }
  int64_t scale = 100'000;
  for (char c : decimals) {
    if (c < '0' || c > '9') return bad;
    ppm += (c - '0') * scale;
    scale /= 10;
  }
  if (ppm <= 0 || ppm > 1'000'000) return bad;
  return ppm;
}

std::string ShareText(int64_t ppm) {
  if (ppm == 1'000'000) return "1";
  std::string decimals = std::to_string(1'000'000 + ppm % 1'000'000).substr(1);
  while (!decimals.empty() && decimals.back() == '0') decimals.pop_back();
  return decimals.empty() ? "0" : Cat("0.", decimals);
}

const Table<LeaseTerms>& LeaseTermsTable() {
  using R = Rows<LeaseTerms>;
  using std::chrono::duration_cast;
  static const Table<LeaseTerms> table(
      {
          {.name = "ttl",
           .value = R::Custom(
               Cat("duration, ", FormatDuration(duration_cast<Micros>(kMinLeaseTtl)), " to ",
                   FormatDuration(duration_cast<Micros>(kMaxLeaseTtl))),
               [](const YamlReader& r, const YAML::Node& n, const std::string& path,
                  LeaseTerms& out) -> Status {
                 auto d = r.Duration(n, path);
                 if (!d.ok()) return d.status();
                 if (*d < kMinLeaseTtl || *d > kMaxLeaseTtl) {
                   return r.Error(
                       n, path,
                       Cat("expected between ", FormatDuration(duration_cast<Micros>(kMinLeaseTtl)),
                           " and ", FormatDuration(duration_cast<Micros>(kMaxLeaseTtl))));
                 }
                 out.ttl = *d;
                 return Status::Ok();
               },
               [](const LeaseTerms& t) { return FormatDuration(duration_cast<Micros>(t.ttl)); }),
           .doc = "a lease is never spent longer than this after the request that took it"},
          {.name = "max_share",
           .value = R::Custom(
               "share, above 0 and at most 1",
               [](const YamlReader& r, const YAML::Node& n, const std::string& path,
                  LeaseTerms& out) -> Status {
                 auto text = r.String(n, path);
                 if (!text.ok()) return text.status();
                 auto ppm = ParseShare(*text);
                 if (!ppm.ok()) return r.Error(n, path, ppm.status().message());
                 out.max_share_ppm = *ppm;
                 return Status::Ok();
               },
               [](const LeaseTerms& t) { return ShareText(t.max_share_ppm); }),
           .doc = "of a limit's capacity, what all instances together hold in leases at most "
                  "(each its 1/store.instances)"},
      },
      {.doc = "Exact leases (algorithms.md, Leases): an instance takes units of a hot key up "
              "front and decides its requests in memory. Off, on, or these terms.",
       .check = [](const YamlReader&, const YAML::Node&, const std::string&, LeaseTerms& out) {
         out.enabled = true;
         return Status::Ok();
       }});
  return table;
}

}  // namespace caudal::config_internal

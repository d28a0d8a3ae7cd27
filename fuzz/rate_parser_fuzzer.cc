// Fuzzer for the duration and rate parsers (configs and command lines are untrusted input).
//
// Any text either parses, and then formats back to a spelling that parses to the same value, or
// fails with kInvalidArgument and a message that quotes the text. Never a crash, an overflow or
// an exception. Parsed rates are also handed to Limit::Create, which must accept or refuse them
// cleanly.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "caudal/algorithms/limit.h"
#include "caudal/common/clock.h"
#include "fuzz_check.h"

namespace caudal {
namespace {

void CheckRefusal(const Status& s, std::string_view text) {
  FUZZ_CHECK(s.code() == StatusCode::kInvalidArgument);
  FUZZ_CHECK(s.message().find("\"" + std::string(text) + "\"") != std::string::npos);
}

void Run(std::string_view text) {
  const Result<Micros> d = ParseDuration(text);
  if (d.ok()) {
    FUZZ_CHECK(d->count() >= 0);
    const std::string spelled = FormatDuration(*d);
    const Result<Micros> again = ParseDuration(spelled);
    FUZZ_CHECK(again.ok() && *again == *d);
  } else {
    CheckRefusal(d.status(), text);
  }

  const Result<Rate> r = ParseRate(text);
  if (!r.ok()) {
    CheckRefusal(r.status(), text);
    return;
  }
  FUZZ_CHECK(r->count > 0 && r->period.count() > 0);
  const Result<Rate> again = ParseRate(FormatRate(*r));
  FUZZ_CHECK(again.ok() && *again == *r);
  for (Algorithm a : kAllAlgorithms) {
    const LimitSpec spec = IsWindowAlgorithm(a) ? LimitSpec::Window(a, r->count, r->period)
                                                : LimitSpec::Bucket(a, r->count, *r);
    const Result<Limit> l = Limit::Create(spec);
    if (l.ok()) {
      FUZZ_CHECK(l->capacity() == r->count && l->rate() == *r);
      FUZZ_CHECK(l->refill_count() > 0 && l->refill_period_us() > 0);
    } else {
      FUZZ_CHECK(l.status().code() == StatusCode::kInvalidArgument);
    }
  }
}

}  // namespace
}  // namespace caudal

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  caudal::Run(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}

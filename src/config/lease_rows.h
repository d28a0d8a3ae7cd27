// The rows of a lease's terms (LeaseTerms, caudal/decorators/lease_terms.h), shared by
// `store.lease`, a policy's `lease` and an Envoy rule's `rate_limit.lease`: `off` (or `on`, the
// default terms), or a map `{ttl: 250ms, max_share: 0.1}` whose fields left out take their
// defaults. A map turns leasing on.
#pragma once

#include <optional>

#include "caudal/decorators/lease_terms.h"
#include "config/field_table.h"
#include "config/field_values.h"

namespace caudal::config_internal {

// lease.ttl and lease.max_share.
const Table<LeaseTerms>& LeaseTermsTable();

// "0.1" → 100'000 parts per million: above 0, at most 1, at most 6 decimals.
Result<int64_t> ParseShare(std::string_view text);
std::string ShareText(int64_t ppm);

// The row's value, for a member that is a LeaseTerms or an optional one (unset: inherited).
template <typename T, typename Get>
Value<T> LeaseValue(Get get) {
  using R = Rows<T>;
  using M = typename R::template Member<Get>;
  const LeaseTerms off{};
  const LeaseTerms on{.enabled = true};
  return R::Either(
      R::Choice(get, {{"off", M{off}}, {"on", M{on}}, {"false", M{off}}, {"true", M{on}}}),
      R::Map(get, LeaseTermsTable()));
}

}  // namespace caudal::config_internal

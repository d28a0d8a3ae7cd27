// A Store decorator for tests: every key it may group becomes a member of a group (a grouped key,
// caudal/store/store.h), so that a suite written with keys of their own runs unchanged on grouped
// state. The distinct keys it meets are grouped in fours, in the order met: a request on several
// keys mostly names members of one group, and no group reaches a store's bound on live members.
// A key keeps its hash tag (in its group's name), so a suite's keys stay in the slots it chose.
// Grouped: a compact algorithm's key, not native, not a share's, without '#'.
#pragma once

#include <memory>

#include "caudal/store/store.h"

namespace caudal::testing {

std::unique_ptr<Store> GroupKeys(std::unique_ptr<Store> inner);

}  // namespace caudal::testing

// Regions deciding with leases from one authoritative store, the alternative to replicating a
// store per region (SimulationOptions::regions): the model `caudal simulate --regions` runs beside
// replication on the same traffic, latency and partition.
//
// Request i goes to region i mod `regions`, as for replication. Every region is `one_way` from
// the store; each keeps its leases in the lease store's own table (src/decorators/lease_table.h),
// so sizing, renewal, expiry and dry refusals are the lease store's; the store is a MemoryStore
// deciding at the time a call reaches it. A request its leases cover (or refuse, dry) is decided
// at once; any other waits a round trip. A region cut off spends what its leases hold, then
// refuses (the `deny` failure mode, at once: its breaker is open); calls and answers crossing the
// cut are lost, the store having applied what reached it. Ended leases are given back every
// 50 ms.
#pragma once

#include <cstdint>
#include <vector>

#include "caudal/algorithms/limit.h"
#include "caudal/common/clock.h"
#include "simulate/traffic.h"

namespace caudal::simulate {

// A region cut off from the store, and from the other regions, during [from, until).
struct Partition {
  int64_t region = 0;
  Micros from{0};
  Micros until{0};
};

struct LeaseRegionsOptions {
  int64_t regions = 2;
  Micros one_way{0};  // each region to the store
  Nanos ttl = std::chrono::seconds(1);
  int64_t max_share_ppm = 300'000;
  std::vector<Partition> partitions{};
  Micros window{0};                    // W, for max_in_window
  std::vector<Micros> series_times{};  // as Simulation::series_times
  Micros start{0};
};

struct LeaseRun {
  int64_t offered = 0;
  int64_t admitted = 0;
  int64_t rejected = 0;
  int64_t max_in_window = 0;  // as AlgorithmRun::max_in_window, over every region
  int64_t local = 0;          // decided in their region, without waiting on the store
  int64_t failed = 0;         // refused by the failure mode (cut off, not covered)
  int64_t unspent = 0;        // units leased and never spent: given back or lost
  Micros p99{0};              // decision latency: 0 for a local one, a round trip otherwise
  std::vector<int64_t> series{};
};

// Preconditions: the algorithm leases (SupportsLease); traffic as for Simulate.
LeaseRun RunLeaseRegions(const Limit& limit, const Traffic& traffic, const LeaseRegionsOptions& o);

}  // namespace caudal::simulate

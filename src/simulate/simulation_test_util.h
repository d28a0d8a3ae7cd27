// Helpers shared by the simulator's tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <utility>

#include "simulate/simulator.h"

namespace caudal::simulate {

// The run of algorithm `a` in `sim` (a test failure when there is none).
inline const AlgorithmRun& RunOf(const Simulation& sim, Algorithm a) {
  const auto it = std::find_if(sim.runs.begin(), sim.runs.end(),
                               [&](const AlgorithmRun& r) { return r.algorithm == a; });
  EXPECT_NE(it, sim.runs.end()) << AlgorithmName(a);
  return *it;
}

// Simulate(t, o), which must succeed.
inline Simulation Sim(const Traffic& t, SimulationOptions o) {
  auto sim = Simulate(t, o);
  EXPECT_TRUE(sim.ok()) << sim.status().ToString();
  return sim.ok() ? std::move(*sim) : Simulation{};
}

}  // namespace caudal::simulate

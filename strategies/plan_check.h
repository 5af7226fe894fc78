// The rules a plan must keep to run a scenario, each written once. The search prunes with
// them (each rule at the enumeration level where the values it reads are decided), and
// lowering, the backends, the CLI and the GUI check a finished plan with check_plan.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/problem.h"
#include "core/scenario.h"

namespace monarch {

// The search's enumeration levels, outermost first: a rule of a level reads only the plan
// values set at that level or an outer one.
enum class PlanLevel { kTp, kCp, kPp, kDp, kExperts, kVpp, kMicroBatch, kSwitches };
inline constexpr size_t kNumPlanLevels = 8;

struct PlanRule {
  const char* kind;   // the search's rejection group ("tp-heads"), shown with its reason
  PlanLevel level;
  const char* where;  // the JSON path of the key at fault ("/parallelism/tp")
  // Why `plan` breaks the rule for `scenario`, or "" when it keeps it.
  std::string (*broken)(const Scenario& scenario, const Plan& plan);
};

// Every rule, in the order the search applies them.
const std::vector<PlanRule>& plan_rules();

// The first rule of `level` that `plan` breaks (its reason in *why), or nullptr.
const PlanRule* first_broken_rule(PlanLevel level, const Scenario& scenario, const Plan& plan, std::string* why);

// The first rule `plan` breaks, as a problem at its JSON path (later rules may read values
// the broken one guards, as the search never reaches them); empty when the plan can run the
// scenario. The layer split (layers_per_stage) is checked where it is cut into chunks
// (strategies/lowering.h, chunk_layers).
Problems check_plan(const Scenario& scenario, const Plan& plan);

}  // namespace monarch

// Text for numbers and plans as the GUI shows them (units always printed).
#pragma once

#include <QString>
#include <cstdint>
#include <string_view>

#include "core/scenario.h"

namespace monarch::gui {

// "13.8 s", "412 ms", "35.2 us", "0 s".
QString format_seconds(double s);
// "1.50 GiB", "12.0 MiB", "512 B" (binary prefixes, 2^10).
QString format_bytes(double bytes);
// describe(plan, PlanDetail::kFull) (core/scenario.h), e.g.
// "tp8 pp8 dp1 cp1 ep1 vpp3 mbs1 interleaved-1f1b sp recompute=selective zero0".
QString plan_summary(const Plan& plan);
// What the plan does with the activations the backward needs: its recompute ("none",
// "selective", "full"), and with activation offloading the layers sent to host memory
// ("none, offload 38 layers").
QString activations_text(const Plan& plan);

}  // namespace monarch::gui

// A small mixture-of-experts block trained on CPUs (fp32), single-process or with expert
// parallelism over the ranks of a communicator (as in realrt/dlrm_cpu.h).
//
//   x_in [tokens, H] -> x = x_in W0 (dense, data-parallel)
//   router: logits = x Wg [H, E]; top-k experts per token; gates = softmax over those k logits
//   expert e: relu(x W1_e [H, F]) W2_e [F, H]
//   y[t] = sum over the token's k experts of gate * expert(x[t]);  loss = 0.5 |y - target|^2,
//   mean over the global tokens.
//
// Expert parallelism over N ranks (EP = N = DP, as Megatron carves EP out of DP): rank r holds
// experts [r E/N, (r+1) E/N) and its own tokens. Four all-to-alls per step, as Megatron's
// token dispatcher: dispatch (tokens to their experts), combine (expert outputs back),
// backward dispatch of the output gradients, backward combine of the input gradients. W0 and
// Wg gradients are all-reduced; every expert's gradient is complete on its owner. No token is
// dropped (capacity factor = infinity), so a rank's dispatch send buffer is exactly
// tokens x top_k x H elements whatever the routing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "realrt/dlrm_cpu.h"  // DlrmComm, LocalComm

namespace monarch::realrt {

struct MoeCpuConfig {
  int64_t hidden = 16;
  int64_t ffn = 32;
  int64_t experts = 4;
  int64_t top_k = 2;
  int64_t global_tokens = 64;
  int64_t steps = 10;
  float lr = 0.5f;
  uint64_t seed = 1;
};

struct MoeCpuRun {
  std::vector<double> losses;           // before each step's update
  int64_t dispatch_send_bytes = 0;      // step 0, this rank's dispatch send buffer
  int64_t combine_send_bytes = 0;       // step 0, this rank's combine send buffer
  int64_t a2a_calls_per_step = 0;       // data all-to-alls (the per-expert counts exchange not included)
};

std::string check_moe_cpu_config(const MoeCpuConfig& c, int world_size);

// comm.size() == 1: every expert local, no all-to-all. Else expert parallel over comm.
MoeCpuRun train_moe_cpu(const MoeCpuConfig& c, DlrmComm& comm);

}  // namespace monarch::realrt

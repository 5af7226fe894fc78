// dlrm_cpu_check: trains the small DLRM of realrt/dlrm_cpu.h single-process and with
// table-wise and row-wise embedding sharding over MPI, and checks that
//   - every step's loss matches the single-process run within 1e-5 relative,
//   - each rank's all-to-all send buffer equals core/dlrm_model's prediction in bytes.
// Run: mpirun --allow-run-as-root --oversubscribe -np 2 build/realrt/dlrm_cpu_check
// Exit status 0 when every check passes, 1 otherwise (ctest runs it).
#include <mpi.h>

#include <cmath>
#include <cstdio>

#include "core/cost_model.h"
#include "core/dlrm_model.h"
#include "core/presets.h"
#include "realrt/dlrm_cpu.h"
#include "realrt/dlrm_mpi_comm.h"
#include "realrt/dlrm_moe_cpu.h"

namespace monarch::realrt {
namespace {

Scenario scenario_of(const DlrmCpuConfig& c, int n) {
  Scenario s;
  s.model.architecture = Architecture::kDlrm;
  for (size_t t = 0; t < c.table_rows.size(); ++t)
    s.model.dlrm.tables.push_back({std::to_string(t), c.table_rows[t], c.dim, static_cast<double>(c.pooling)});
  s.model.dlrm.dense_features = c.dense_features;
  s.model.dlrm.bottom_mlp = c.bottom_mlp;
  s.model.dlrm.top_mlp = c.top_mlp;
  s.cluster.num_gpus = n;
  s.cluster.gpus_per_node = n;
  s.training.global_batch_size = c.global_batch;
  s.training.precision = Precision::kFp32;
  return s;
}

// Expert parallelism: the EP all-to-all bytes core/cost_model predicts for one MoE layer.
int64_t predicted_ep_a2a_bytes(const MoeCpuConfig& c, int n) {
  Scenario s;
  s.model.architecture = Architecture::kGpt;
  s.model.num_layers = 1;
  s.model.hidden_size = c.hidden;
  s.model.num_attention_heads = 1;
  s.model.num_kv_heads = 1;
  s.model.ffn_hidden_size = c.ffn;
  s.model.vocab_size = 64;
  s.model.seq_length = c.global_tokens / n;  // one sequence per rank
  s.model.num_experts = c.experts;
  s.model.moe_top_k = c.top_k;
  s.model.moe_ffn_hidden_size = c.ffn;
  s.cluster.gpu = find_gpu_preset("H100-SXM")->spec;
  s.cluster.num_gpus = n;
  s.cluster.gpus_per_node = n;
  s.training.global_batch_size = n;
  s.training.micro_batch_size = 1;
  s.training.precision = Precision::kFp32;
  Plan p;
  p.dp = n;
  p.ep = n;
  p.micro_batch_size = 1;
  for (const auto& col : layer_costs(s, p).collectives)
    if (col.group == GroupKind::kEp && col.kind == CollectiveKind::kAllToAll) return col.bytes;
  return -1;
}

int check_moe(DlrmComm& comm) {
  const int r = comm.rank(), n = comm.size();
  MoeCpuConfig c;
  if (const std::string why = check_moe_cpu_config(c, n); !why.empty()) {
    if (r == 0) std::fprintf(stderr, "dlrm_cpu_check: moe: %s\n", why.c_str());
    return 1;
  }
  LocalComm local;
  const MoeCpuRun ref = train_moe_cpu(c, local);
  const MoeCpuRun got = train_moe_cpu(c, comm);
  double worst = 0;
  for (size_t s = 0; s < ref.losses.size(); ++s)
    worst = std::max(worst, std::fabs(got.losses.at(s) - ref.losses[s]) / std::fabs(ref.losses[s]));
  const bool loss_ok = got.losses.size() == ref.losses.size() && worst <= 1e-5;
  const int64_t predicted = predicted_ep_a2a_bytes(c, n);
  std::vector<float> totals = {static_cast<float>(got.dispatch_send_bytes), static_cast<float>(got.combine_send_bytes)};
  comm.allreduce_sum(totals);
  const bool bytes_ok = got.dispatch_send_bytes == predicted && totals[0] == totals[1] && got.a2a_calls_per_step == 4;
  std::printf("rank %d moe ep%d     losses %.6f -> %.6f, worst relative difference %.2e (<= 1e-5: %s); "
              "dispatch all-to-all send %lld B, predicted %lld B, combine %lld B (%s)\n",
              r, n, got.losses.front(), got.losses.back(), worst, loss_ok ? "ok" : "FAIL",
              static_cast<long long>(got.dispatch_send_bytes), static_cast<long long>(predicted),
              static_cast<long long>(got.combine_send_bytes), bytes_ok ? "ok" : "FAIL");
  return !loss_ok + !bytes_ok;
}

int run() {
  MpiDlrmComm comm;
  const int r = comm.rank(), n = comm.size();
  DlrmCpuConfig c;
  c.table_rows = {100, 37, 250};
  if (const std::string why = check_dlrm_cpu_config(c, n); !why.empty()) {
    if (r == 0) std::fprintf(stderr, "dlrm_cpu_check: %s\n", why.c_str());
    return 2;
  }
  LocalComm local;
  const DlrmCpuRun ref = train_dlrm_cpu(c, EmbeddingSharding::kLocal, local);
  int failures = 0;
  const Scenario sc = scenario_of(c, n);
  for (EmbeddingSharding kind : {EmbeddingSharding::kTableWise, EmbeddingSharding::kRowWise}) {
    const char* name = kind == EmbeddingSharding::kTableWise ? "table-wise" : "row-wise";
    const DlrmCpuRun got = train_dlrm_cpu(c, kind, comm);
    double worst = 0;
    for (size_t s = 0; s < ref.losses.size(); ++s)
      worst = std::max(worst, std::fabs(got.losses.at(s) - ref.losses[s]) / std::fabs(ref.losses[s]));
    const bool loss_ok = got.losses.size() == ref.losses.size() && worst <= 1e-5;

    DlrmShardingPlan plan;
    for (size_t t = 0; t < c.table_rows.size(); ++t)
      plan.tables.push_back(kind == EmbeddingSharding::kTableWise
                                ? TablePlacement{TableSharding::kTableWise, {static_cast<int32_t>(t % n)}}
                                : TablePlacement{TableSharding::kRowWise, {}});
    const DlrmRankLoad load = dlrm_rank_loads(sc, plan).at(r);
    const int64_t predicted = kind == EmbeddingSharding::kTableWise ? load.a2a_send_bytes : load.rw_reduce_scatter_bytes;
    // Backward: row-wise sends the same buffer back (all-gather); table-wise sends each rank's
    // own b samples' gradients of every table (a2a_backward_send_bytes), so the ranks' totals
    // match the forward totals.
    std::vector<float> totals = {static_cast<float>(got.forward_a2a_send_bytes), static_cast<float>(got.backward_a2a_send_bytes)};
    comm.allreduce_sum(totals);
    const bool bytes_ok = got.forward_a2a_send_bytes == predicted && totals[0] == totals[1] && got.a2a_calls_per_step == 2 &&
                          got.backward_a2a_send_bytes ==
                              (kind == EmbeddingSharding::kTableWise ? load.a2a_backward_send_bytes : predicted);
    std::printf("rank %d %-10s losses %.6f -> %.6f, worst relative difference %.2e (<= 1e-5: %s); "
                "forward all-to-all send %lld B, predicted %lld B, backward %lld B (%s)\n",
                r, name, got.losses.front(), got.losses.back(), worst, loss_ok ? "ok" : "FAIL",
                static_cast<long long>(got.forward_a2a_send_bytes), static_cast<long long>(predicted),
                static_cast<long long>(got.backward_a2a_send_bytes), bytes_ok ? "ok" : "FAIL");
    failures += !loss_ok + !bytes_ok;
  }
  failures += check_moe(comm);
  int all = 0;
  MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  return all == 0 ? 0 : 1;
}

}  // namespace
}  // namespace monarch::realrt

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int rc = monarch::realrt::run();
  MPI_Finalize();
  return rc;
}

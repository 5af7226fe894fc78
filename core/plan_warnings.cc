#include "core/plan_warnings.h"

#include "core/cost_model.h"
#include "core/placement.h"

namespace monarch {

std::vector<std::string> plan_warnings(const Scenario& sc, const Plan& p) {
  std::vector<std::string> out;
  const int64_t gpn = sc.cluster.gpus_per_node;
  if (sc.model.architecture == Architecture::kDlrm || gpn <= 0) return out;
  const std::string domain = " nodes of " + std::to_string(gpn) + " GPUs";
  auto crossing = [&](GroupKind kind, const char* name, const char* what) {
    const GroupSpan span = group_span(kind, p, gpn);
    if (span.crosses_nodes())
      out.push_back(std::string(name) + " " + std::to_string(span.size) + " spans " + std::to_string(span.nodes) + domain + ": " +
                    what + " run over the inter-node network");
  };
  crossing(GroupKind::kTp, "TP", "its per-layer collectives");
  if (sc.model.is_moe()) {
    if (p.expert_tp() != p.tp) crossing(GroupKind::kExpertTp, "expert TP", "its per-layer collectives");
    crossing(GroupKind::kEp, "EP", "the token all-to-alls");
  }
  // A GEMM of M token rows by an h x n weight does 2 M h n FLOPs on about 2 h n weight bytes:
  // M FLOP per byte. Below the ridge point (peak / HBM bandwidth) it is memory-bound.
  const double peak_flops = peak_tflops(sc.cluster.gpu, sc.training.precision) * 1e12;
  const double hbm_Bps = sc.cluster.gpu.memory_bandwidth_GBps * 1e9;
  const double rows = static_cast<double>(p.micro_batch_size) * static_cast<double>(sc.model.seq_length) /
                      static_cast<double>(std::max<int64_t>(p.cp, 1));
  if (peak_flops > 0 && hbm_Bps > 0 && rows > 0 && rows < peak_flops / hbm_Bps * bytes_per_element(sc.training.precision) / 2.0)
    out.push_back("a micro-batch of " + std::to_string(static_cast<int64_t>(rows)) +
                  " tokens per rank is below the GPU's ridge point: its GEMMs are memory-bound");
  if (p.tp_comm_overlap && p.tp > 1 && !gpu_runs_tp_comm_overlap(sc.cluster.gpu))
    out.push_back("TP communication overlap on " + (sc.cluster.gpu.name.empty() ? std::string("this GPU") : sc.cluster.gpu.name) +
                  ": Transformer Engine's userbuffers need CUDA multicast (Hopper and later); predicted as if it ran");
  if (p.tp_comm_overlap && !tp_group_in_nvlink_domain(p, gpn))
    out.push_back("TP communication overlap with TP " + std::to_string(p.tp) + " over " +
                  std::to_string(group_span(GroupKind::kTp, p, gpn).nodes) + domain +
                  ": its kernels write into the peers' memory, which only one NVLink domain shares; predicted as if it ran");
  return out;
}

}  // namespace monarch

// scenario_to_json: the canonical form of a scenario (every key spelled out).
#include "core/scenario_io_detail.h"

namespace monarch {

using scenario_io_detail::json;
using scenario_io_detail::reliability_to_json;

nlohmann::json scenario_to_json(const Scenario& s) {
  json j;
  j["name"] = s.name;
  const ModelConfig& m = s.model;
  json mj;
  if (!m.preset.empty()) mj["preset"] = m.preset;
  mj["architecture"] = to_string(m.architecture);
  if (m.architecture == Architecture::kDlrm) {
    json tables = json::array();
    for (const auto& t : m.dlrm.tables)
      tables.push_back({{"name", t.name}, {"rows", t.rows}, {"dim", t.dim}, {"pooling_factor", t.pooling_factor}});
    mj["embedding_tables"] = tables;
    mj["bottom_mlp"] = m.dlrm.bottom_mlp;
    mj["top_mlp"] = m.dlrm.top_mlp;
    mj["dense_features"] = m.dlrm.dense_features;
    mj["interaction"] = m.dlrm.interaction;
    if (m.dlrm.interaction == "dcn") {
      mj["dcn_rank"] = m.dlrm.dcn_rank;
      mj["dcn_layers"] = m.dlrm.dcn_layers;
    }
    mj["embedding_optimizer"] = m.dlrm.embedding_optimizer;
    if (m.dlrm.embedding_dtype) mj["embedding_dtype"] = to_string(*m.dlrm.embedding_dtype);
    if (m.dlrm.uvm_cache_hit_rate >= 0) mj["uvm_cache_hit_rate"] = m.dlrm.uvm_cache_hit_rate;
  } else {
    mj["num_layers"] = m.num_layers;
    mj["hidden_size"] = m.hidden_size;
    mj["num_attention_heads"] = m.num_attention_heads;
    mj["num_kv_heads"] = m.num_kv_heads;
    if (m.head_dim > 0) mj["head_dim"] = m.head_dim;
    mj["ffn_hidden_size"] = m.ffn_hidden_size;
    mj["vocab_size"] = m.vocab_size;
    mj["seq_length"] = m.seq_length;
    mj["tie_embeddings"] = m.tie_embeddings;
    if (m.hidden_dropout) mj["hidden_dropout"] = *m.hidden_dropout;
    if (m.attention_dropout) mj["attention_dropout"] = *m.attention_dropout;
    if (m.activation) mj["activation"] = to_string(*m.activation);
    if (m.attention_kernel) mj["attention_kernel"] = to_string(*m.attention_kernel);
    if (m.qk_layernorm) mj["qk_layernorm"] = true;
    if (m.is_moe()) {
      mj["num_experts"] = m.num_experts;
      mj["moe_top_k"] = m.moe_top_k;
      mj["moe_ffn_hidden_size"] = m.moe_ffn_hidden_size;
      if (m.moe_dropless) mj["moe_dropless"] = true;
      else mj["moe_capacity_factor"] = m.moe_capacity_factor;
      if (m.moe_router_force_load_balancing) mj["moe_router_force_load_balancing"] = true;
    }
  }
  j["model"] = mj;

  const ClusterConfig& c = s.cluster;
  json gpu = {{"name", c.gpu.name},
              {"peak_tflops",
               {{"fp32", c.gpu.peak_tflops.fp32},
                {"tf32", c.gpu.peak_tflops.tf32},
                {"bf16", c.gpu.peak_tflops.bf16},
                {"fp16", c.gpu.peak_tflops.fp16},
                {"fp8", c.gpu.peak_tflops.fp8}}},
              {"memory_gib", c.gpu.memory_gib},
              {"memory_bandwidth_GBps", c.gpu.memory_bandwidth_GBps}};
  if (!c.gpu.profile.empty()) gpu["profile"] = c.gpu.profile;
  if (c.gpu.power_limit_W > 0) {  // the TDP only matters beside a limit
    gpu["tdp_W"] = c.gpu.tdp_W;
    gpu["power_limit_W"] = c.gpu.power_limit_W;
  }
  json cj = {{"gpu", gpu}, {"num_gpus", c.num_gpus}, {"gpus_per_node", c.gpus_per_node}};
  json intra = json::object(), inter = json::object();
  if (c.intra_node.bandwidth_GBps > 0) intra["bandwidth_GBps"] = c.intra_node.bandwidth_GBps;
  intra["latency_us"] = c.intra_node.latency_us;
  if (c.inter_node.bandwidth_GBps > 0) inter["bandwidth_GBps"] = c.inter_node.bandwidth_GBps;
  if (c.nics_per_node > 0) inter["nics_per_node"] = c.nics_per_node;
  inter["latency_us"] = c.inter_node.latency_us;
  inter["topology"] = to_string(c.topology);
  inter["oversubscription"] = c.oversubscription;
  cj["intra_node"] = intra;
  cj["inter_node"] = inter;
  j["cluster"] = cj;

  const TrainingConfig& t = s.training;
  json tj = {{"global_batch_size", t.global_batch_size},
             {"precision", to_string(t.precision)},
             {"optimizer", to_string(t.optimizer)},
             {"steps", t.steps},
             {"seed", t.seed},
             {"framework", to_string(t.framework)}};
  if (t.micro_batch_size) tj["micro_batch_size"] = *t.micro_batch_size;
  if (t.total_tokens > 0) tj["total_tokens"] = t.total_tokens;
  if (t.cuda_graphs) tj["cuda_graphs"] = true;
  if (t.compile) tj["compile"] = true;
  if (t.cuda_launch_blocking) tj["cuda_launch_blocking"] = true;
  if (t.grad_reduce_in_fp32) tj["grad_reduce_in_fp32"] = *t.grad_reduce_in_fp32;
  if (t.cross_entropy_loss_fusion) tj["cross_entropy_loss_fusion"] = *t.cross_entropy_loss_fusion;
  if (t.fp8_recipe) tj["fp8_recipe"] = to_string(*t.fp8_recipe);
  j["training"] = tj;

  const ParallelismConstraints& p = s.parallelism;
  json pj = json::object();
  auto put = [&](const char* k, const std::optional<int64_t>& v) {
    if (v) pj[k] = *v;
  };
  put("tensor_parallel_degree", p.tp);
  put("pipeline_parallel_degree", p.pp);
  put("data_parallel_degree", p.dp);
  put("context_parallel_degree", p.cp);
  put("expert_parallel_degree", p.ep);
  put("virtual_pipeline_degree", p.vpp);
  put("expert_tensor_parallel_degree", p.etp);
  if (p.schedule) pj["pipeline_schedule"] = to_string(*p.schedule);
  if (p.sequence_parallel) pj["sequence_parallel"] = *p.sequence_parallel;
  if (p.recompute) pj["activation_recompute"] = to_string(*p.recompute);
  if (p.zero_stage) pj["zero_stage"] = *p.zero_stage;
  if (p.overlap_grad_reduce) pj["overlap_grad_reduce"] = *p.overlap_grad_reduce;
  if (p.overlap_param_gather) pj["overlap_param_gather"] = *p.overlap_param_gather;
  if (p.tp_comm_overlap) pj["tp_comm_overlap"] = *p.tp_comm_overlap;
  if (p.ep_comm_overlap) pj["ep_comm_overlap"] = *p.ep_comm_overlap;
  if (p.activation_offload_layers) pj["activation_offload_layers"] = *p.activation_offload_layers;
  if (p.layers_per_stage) pj["layers_per_stage"] = *p.layers_per_stage;
  if (p.account_for_embedding) pj["account_for_embedding_in_pipeline_split"] = true;
  if (p.account_for_loss) pj["account_for_loss_in_pipeline_split"] = true;
  if (p.embedding_sharding) pj["embedding_sharding"] = *p.embedding_sharding;
  j["parallelism"] = pj;

  j["search"] = {{"top_k", s.search.top_k}, {"objective", to_string(s.search.objective)}};
  if (!s.backends.empty()) {
    json b = json::array();
    for (Backend x : s.backends) b.push_back(to_string(x));
    j["backends"] = b;
  }
  if (!s.whatif.stragglers.empty() || !s.whatif.degraded_links.empty()) {
    json w = json::object();
    json st = json::array();
    for (const auto& x : s.whatif.stragglers) {
      json e = {{"slowdown", x.slowdown}};
      if (x.gpu >= 0) e["gpu"] = x.gpu;
      else e["node"] = x.node;
      st.push_back(e);
    }
    json dl = json::array();
    for (const auto& x : s.whatif.degraded_links) dl.push_back({{"node", x.node}, {"bandwidth_factor", x.bandwidth_factor}});
    if (!st.empty()) w["stragglers"] = st;
    if (!dl.empty()) w["degraded_links"] = dl;
    j["whatif"] = w;
  }
  if (s.reliability) j["reliability"] = reliability_to_json(*s.reliability);
  return j;
}

}  // namespace monarch

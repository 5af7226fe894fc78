#include "core/framework_bridge.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <map>
#include <regex>
#include <sstream>

#include "core/framework_rules.h"
#include "core/model_math.h"
#include "core/presets.h"

namespace monarch {
namespace {

// Whether the exported run reduces its gradients in fp32: the scenario's setting, or else the
// target framework's default (the scenario may name another framework than the export's).
bool exported_grad_reduce_in_fp32(const Scenario& s, Framework target) {
  TrainingConfig t = s.training;
  t.framework = target;
  return grad_reduce_in_fp32(t);
}

std::string str(int64_t v) { return std::to_string(v); }

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

// Transformer layers of every model chunk (virtual stage), pp x vpp of them in model order
// (chunk c of pipeline stage s at c x pp + s, Megatron's and torchtitan's loop order): the
// plan's split, else the one default rule (core/model_math.h).
std::vector<int64_t> chunk_layers(const Scenario& s, const Plan& p) { return virtual_stage_layers(s.model.num_layers, p); }

bool all_equal(const std::vector<int64_t>& v) {
  return std::adjacent_find(v.begin(), v.end(), std::not_equal_to<>()) == v.end();
}

// Megatron's --pipeline-model-parallel-layout for a split: one "|"-separated entry per model
// chunk in model order, "E" (embedding) first, "L" (loss) last, "t*N" for N transformer layers
// (megatron/core/transformer/pipeline_parallel_layer_layout.py, parse_str_to_list).
std::string megatron_layout(const std::vector<int64_t>& chunks) {
  std::string out;
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (i > 0) out += "|";
    if (i == 0) out += "E";
    if (chunks[i] == 1) out += "t";
    else if (chunks[i] > 1) out += "t*" + str(chunks[i]);
    if (i + 1 == chunks.size()) out += "L";
  }
  return out;
}

// ----------------------------------------------------------------------------- torchtitan

// A torchtitan v0.2.2 model flavor: torchtitan/models/llama3/__init__.py llama3_args (dim,
// n_layers, n_heads, n_kv_heads; the FFN width from ffn_dim_multiplier and multiple_of; the
// vocabulary of the Llama 3 tokenizer), the same models as monarch-sim's presets.
struct TorchtitanFlavor {
  const char* name;
  const char* flavor;
  const char* preset;
};
constexpr TorchtitanFlavor kTorchtitanFlavors[] = {
    {"llama3", "8B", "llama3-8b"},
    {"llama3", "70B", "llama3-70b"},
    {"llama3", "405B", "llama3-405b"},
};

bool same_shape(const ModelConfig& a, const ModelConfig& b) {
  return a.architecture == b.architecture && a.num_layers == b.num_layers && a.hidden_size == b.hidden_size &&
         a.num_attention_heads == b.num_attention_heads && a.num_kv_heads == b.num_kv_heads &&
         a.ffn_hidden_size == b.ffn_hidden_size && a.vocab_size == b.vocab_size && a.num_experts == b.num_experts;
}

const TorchtitanFlavor* torchtitan_flavor(const ModelConfig& m) {
  for (const auto& f : kTorchtitanFlavors) {
    const ModelPreset* p = find_model_preset(f.preset);
    if (p && same_shape(p->config, m)) return &f;
  }
  return nullptr;
}

const char* torchtitan_schedule(Schedule s) {
  switch (s) {
    case Schedule::kGpipe: return "GPipe";
    case Schedule::kOneFOneB: return "1F1B";
    case Schedule::kInterleaved: return "Interleaved1F1B";
  }
  return "1F1B";
}

// TOML sections in order, each a list of "key = value" lines.
class Toml {
 public:
  void set(const std::string& section, const std::string& key, const std::string& value) {
    auto it = std::find_if(sections_.begin(), sections_.end(), [&](const auto& s) { return s.first == section; });
    if (it == sections_.end()) it = sections_.insert(sections_.end(), {section, {}});
    it->second.emplace_back(key, value);
  }
  std::string text() const {
    std::ostringstream o;
    for (const auto& [section, keys] : sections_) {
      o << "\n[" << section << "]\n";
      for (const auto& [k, v] : keys) o << k << " = " << v << "\n";
    }
    return o.str();
  }
  // The same settings as torchtitan command-line overrides (--section.key value).
  std::string overrides() const {
    std::ostringstream o;
    for (const auto& [section, keys] : sections_)
      for (const auto& [k, v] : keys) {
        std::string value = v;
        if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
        if (value.front() == '[') value = "'" + value + "'";
        o << " --" << section << "." << k << "=" << value;
      }
    return o.str();
  }

 private:
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>> sections_;
};

// torchtitan/distributed/pipeline_parallel.py generate_llm_fqn_per_model_part: the module
// names of every model part for a split, embedding on the first and norm + output on the last.
std::string torchtitan_module_fqns(const std::vector<int64_t>& chunks) {
  std::string out = "[";
  int64_t layer = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    out += i ? ", [" : "[";
    std::vector<std::string> names;
    if (i == 0) names.push_back("\"tok_embeddings\"");
    for (int64_t l = 0; l < chunks[i]; ++l) names.push_back("\"layers." + str(layer++) + "\"");
    if (i + 1 == chunks.size()) {
      names.push_back("\"norm\"");
      names.push_back("\"output\"");
    }
    for (size_t k = 0; k < names.size(); ++k) out += (k ? ", " : "") + names[k];
    out += "]";
  }
  return out + "]";
}

void export_torchtitan(const Scenario& s, const Plan& p, Problems& refuse, ExportedConfig& out) {
  const std::string where = "--to torchtitan";
  Toml t;
  const ModelConfig& m = s.model;
  if (const TorchtitanFlavor* f = torchtitan_flavor(m)) {
    t.set("model", "name", quoted(f->name));
    t.set("model", "flavor", quoted(f->flavor));
  } else {
    const std::string flavor = m.preset.empty() ? "monarch" : m.preset;
    t.set("model", "name", quoted(m.is_moe() ? "deepseek_v3" : "llama3"));
    t.set("model", "flavor", quoted(flavor));
    out.warnings.push_back("torchtitan v0.2.2 ships no flavor of this model's shape; register flavor \"" + flavor +
                           "\" (layers " + str(m.num_layers) + ", dim " + str(m.hidden_size) + ", heads " +
                           str(m.num_attention_heads) + ", kv heads " + str(m.num_kv_heads) + ", ffn " +
                           str(m.ffn_hidden_size) + ", vocab " + str(m.vocab_size) +
                           (m.is_moe() ? ", experts " + str(m.num_experts) + " top-" + str(m.moe_top_k) : "") +
                           ") in the model's __init__.py before launching");
  }
  if (s.training.precision == Precision::kFp8) t.set("model", "converters", "[\"quantize.linear.float8\"]");
  if (m.moe_router_force_load_balancing) t.set("debug", "moe_force_load_balance", "true");
  if (m.qk_layernorm)
    refuse.push_back({where, "torchtitan's llama3 and deepseek_v3 models have no query / key norm (model.qk_layernorm)"});
  if (m.is_moe() && !m.moe_dropless)
    refuse.push_back({where, "torchtitan's MoE routes every token (token choice, no capacity factor: "
                             "torchtitan/models/moe/moe.py MoEArgs); the model drops tokens at capacity factor " +
                                 num(m.moe_capacity_factor) + " (set model.moe_dropless to export it)"});
  if (s.training.precision == Precision::kFp16)
    refuse.push_back({where, "torchtitan v0.2.2 trains in bfloat16 or float32 (training.mixed_precision_param); fp16 is not offered"});

  // Batch: local_batch_size is one data-parallel rank's batch per step; with a pipeline it is
  // split into pipeline_parallel_microbatch_size micro-batches, without one torchtitan
  // accumulates global_batch_size / (local_batch_size x dp) steps.
  const int64_t micro_batches = num_micro_batches(s, p);
  t.set("training", "local_batch_size", str(p.pp > 1 ? p.micro_batch_size * micro_batches : p.micro_batch_size));
  t.set("training", "global_batch_size", str(s.training.global_batch_size));
  t.set("training", "seq_len", str(m.seq_length));
  t.set("training", "mixed_precision_param", quoted(s.training.precision == Precision::kFp32 ? "float32" : "bfloat16"));
  t.set("training", "mixed_precision_reduce", quoted(exported_grad_reduce_in_fp32(s, Framework::kTorchtitan) ? "float32" : "bfloat16"));

  // Data parallelism: DDP (replicate) for ZeRO 0, FSDP2 (shard) for ZeRO 2 and 3.
  int64_t replicate = p.dp, shard = 1;
  std::string reshard;
  if (const std::string why = framework_problem(Framework::kTorchtitan, p); !why.empty()) {
    refuse.push_back({where, why});
  } else if (p.zero_stage >= 2) {
    replicate = 1;
    shard = p.dp;
    reshard = p.zero_stage == 2 ? "never" : "always";
  }
  t.set("parallelism", "data_parallel_replicate_degree", str(replicate));
  t.set("parallelism", "data_parallel_shard_degree", str(shard));
  if (!reshard.empty()) t.set("parallelism", "fsdp_reshard_after_forward", quoted(reshard));
  t.set("parallelism", "tensor_parallel_degree", str(p.tp));
  if (p.tp > 1 && !p.sequence_parallel)
    refuse.push_back({where, "torchtitan's tensor parallel plan always shards the norms over the sequence "
                             "(sequence parallel); the plan has tp " + str(p.tp) + " without it"});
  if (p.tp_comm_overlap) t.set("parallelism", "enable_async_tensor_parallel", "true");
  if (p.ep_comm_overlap)
    refuse.push_back({where, "torchtitan has no EP communication overlap (Megatron-Core's combined 1F1B, "
                             "--overlap-moe-expert-parallel-comm); the plan has ep_comm_overlap"});
  if (p.activation_offload_layers > 0)
    refuse.push_back({where, "torchtitan has no layer-wise activation offloading (Megatron-Core's "
                             "--cpu-offloading-num-layers); the plan offloads " + str(p.activation_offload_layers) + " layers"});
  if (s.training.compile) {
    t.set("compile", "enable", "true");
    t.set("compile", "components", "[\"model\", \"loss\"]");
  }
  if (s.training.cuda_graphs)
    refuse.push_back({where, "torchtitan trains without CUDA graphs (training.cuda_graphs); its compile option does not capture them"});
  t.set("parallelism", "context_parallel_degree", str(p.cp));
  t.set("parallelism", "expert_parallel_degree", str(p.ep));
  if (m.is_moe()) t.set("parallelism", "expert_tensor_parallel_degree", str(p.expert_tp()));
  t.set("parallelism", "pipeline_parallel_degree", str(p.pp));
  if (p.pp > 1) {
    t.set("parallelism", "pipeline_parallel_schedule", quoted(torchtitan_schedule(p.schedule)));
    t.set("parallelism", "pipeline_parallel_microbatch_size", str(p.micro_batch_size));
    const std::vector<int64_t> chunks = chunk_layers(s, p);
    if (chunks.empty()) {
      refuse.push_back({where, "the plan does not say how its " + str(m.num_layers) + " layers split over " +
                               str(p.pp * p.vpp) + " pipeline stages (plan.layers_per_stage is empty)"});
    } else if (all_equal(chunks)) {
      // Even split: no stage counts the embedding or the output as a layer.
      t.set("parallelism", "pipeline_parallel_first_stage_less_layers", "0");
      t.set("parallelism", "pipeline_parallel_last_stage_less_layers", "0");
      if (p.vpp > 1) t.set("parallelism", "pipeline_parallel_layers_per_stage", str(chunks.front()));
    } else {
      t.set("parallelism", "module_fqns_per_model_part", torchtitan_module_fqns(chunks));
    }
  }
  if (p.schedule == Schedule::kInterleaved && p.vpp < 2)
    refuse.push_back({where, "Interleaved1F1B needs at least 2 stages per rank; the plan has vpp " + str(p.vpp)});

  switch (p.recompute) {
    case Recompute::kNone: t.set("activation_checkpoint", "mode", quoted("none")); break;
    case Recompute::kSelective:
      t.set("activation_checkpoint", "mode", quoted("selective"));
      t.set("activation_checkpoint", "selective_ac_option", quoted("op"));
      break;
    case Recompute::kFull: t.set("activation_checkpoint", "mode", quoted("full")); break;
  }
  out.text = "# torchtitan v0.2.2 job config written by monarch-sim for \"" + s.name + "\" on " + str(p.world_size()) +
             " GPUs.\n# Launch: NGPU=" + str(std::min<int64_t>(p.world_size(), s.cluster.gpus_per_node)) +
             " CONFIG_FILE=this.toml ./run_train.sh (one torchrun per node)\n# The same settings as overrides:\n#" +
             t.overrides() + "\n" + t.text();
}

// ----------------------------------------------------------------------------- Megatron

// Flag list in order; a flag with an empty value is a switch.
class Flags {
 public:
  void add(const std::string& flag, const std::string& value = "") { flags_.emplace_back(flag, value); }
  std::string lines(const std::string& indent) const {
    std::string o;
    for (const auto& [f, v] : flags_) o += indent + f + (v.empty() ? "" : " " + v) + "\n";
    return o;
  }

 private:
  std::vector<std::pair<std::string, std::string>> flags_;
};

// Megatron-Core's model shape flags (megatron/training/arguments.py, core_v0.19.0).
// Megatron-Core's attention backend (--attention-backend, Megatron-Bridge model.attention_backend)
// for the kernel, or nullptr for the default, which is Transformer Engine's own choice (auto):
// flash is the flash-attn package, local Megatron's own attention storing the scores.
const char* megatron_attention_backend(const ModelConfig& m) {
  switch (m.attention_kernel.value_or(AttentionKernel::kFlash)) {
    case AttentionKernel::kFlash2: return "flash";
    case AttentionKernel::kMaterialized: return "local";
    default: return nullptr;
  }
}

// The first generation of fused attention (FlashAttention-1's CUDA kernels or its Triton port),
// which Megatron-Core's attention backends do not offer: the kernel's name, or nullptr.
const char* first_generation_flash(const std::optional<AttentionKernel>& kernel) {
  if (kernel == AttentionKernel::kFlash1 || kernel == AttentionKernel::kFlash1Triton) return to_string(*kernel);
  return nullptr;
}

void megatron_model_flags(const ModelConfig& m, Flags& f) {
  f.add("--num-layers", str(m.num_layers));
  f.add("--hidden-size", str(m.hidden_size));
  f.add("--num-attention-heads", str(m.num_attention_heads));
  if (m.num_kv_heads > 0 && m.num_kv_heads != m.num_attention_heads) {
    f.add("--group-query-attention");
    f.add("--num-query-groups", str(m.num_kv_heads));
  }
  if (m.head_dim > 0) f.add("--kv-channels", str(m.head_dim));
  f.add("--ffn-hidden-size", str(m.ffn_hidden_size));
  f.add("--seq-length", str(m.seq_length));
  f.add("--max-position-embeddings", str(m.seq_length));
  f.add("--tokenizer-type", "NullTokenizer");  // a fixed vocabulary; replace with the run's tokenizer
  f.add("--vocab-size", str(m.vocab_size));
  if (m.architecture == Architecture::kLlama) {
    f.add("--swiglu");
    f.add("--normalization", "RMSNorm");
    f.add("--position-embedding-type", "rope");
    f.add("--disable-bias-linear");
  }
  if (!m.tie_embeddings) f.add("--untie-embeddings-and-output-weights");
  if (m.hidden_dropout) f.add("--hidden-dropout", num(*m.hidden_dropout));
  if (m.attention_dropout) f.add("--attention-dropout", num(*m.attention_dropout));
  if (const char* backend = megatron_attention_backend(m)) f.add("--attention-backend", backend);
  if (m.qk_layernorm) f.add("--qk-layernorm");
  if (m.is_moe()) {
    f.add("--num-experts", str(m.num_experts));
    f.add("--moe-router-topk", str(m.moe_top_k));
    if (m.moe_ffn_hidden_size > 0) f.add("--moe-ffn-hidden-size", str(m.moe_ffn_hidden_size));
    f.add("--moe-token-dispatcher-type", "alltoall");
    if (!m.moe_dropless) {
      f.add("--moe-expert-capacity-factor", num(m.moe_capacity_factor));
      f.add("--moe-pad-expert-input-to-capacity");
    }
    if (m.moe_router_force_load_balancing) f.add("--moe-router-force-load-balancing");
  }
}

void megatron_recompute_flags(Recompute r, Flags& f) {
  if (r == Recompute::kSelective) f.add("--recompute-granularity", "selective");
  if (r == Recompute::kFull) {
    f.add("--recompute-granularity", "full");
    f.add("--recompute-method", "uniform");
    f.add("--recompute-num-layers", "1");
  }
}

void export_megatron(const Scenario& s, const Plan& p, Problems& refuse, ExportedConfig& out) {
  const std::string where = "--to megatron";
  Flags f;
  f.add("--tensor-model-parallel-size", str(p.tp));
  f.add("--pipeline-model-parallel-size", str(p.pp));
  f.add("--context-parallel-size", str(p.cp));
  if (s.model.is_moe()) {
    f.add("--expert-model-parallel-size", str(p.ep));
    f.add("--expert-tensor-parallel-size", str(p.expert_tp()));
  }
  if (p.sequence_parallel) f.add("--sequence-parallel");
  if (p.pp > 1 && p.schedule == Schedule::kGpipe)
    refuse.push_back({where, "Megatron-LM has no GPipe schedule (its pipelines run 1F1B or interleaved 1F1B)"});
  if (const char* kernel = first_generation_flash(s.model.attention_kernel))
    refuse.push_back({where, std::string("Megatron-LM has no first-generation FlashAttention backend (--attention-backend "
                                         "flash, fused, unfused, local or auto); model.attention_kernel is ") +
                                 kernel});
  if (p.vpp > 1) f.add("--num-virtual-stages-per-pipeline-rank", str(p.vpp));
  if (p.pp > 1) {
    const std::vector<int64_t> chunks = chunk_layers(s, p);
    if (chunks.empty()) {
      refuse.push_back({where, "the plan does not say how its " + str(s.model.num_layers) + " layers split over " +
                               str(p.pp * p.vpp) + " pipeline stages (plan.layers_per_stage is empty)"});
    } else if (!all_equal(chunks)) {
      // First and last stage set apart, the middle even: Megatron's first/last-stage flags;
      // else the layout.
      const std::vector<int64_t> middle(chunks.begin() + 1, chunks.end() - 1);
      if (p.vpp == 1 && p.pp > 2 && all_equal(middle)) {
        if (chunks.front() != middle.front()) f.add("--decoder-first-pipeline-num-layers", str(chunks.front()));
        if (chunks.back() != middle.front()) f.add("--decoder-last-pipeline-num-layers", str(chunks.back()));
      } else if (p.vpp == 1 && p.pp == 2) {
        f.add("--decoder-first-pipeline-num-layers", str(chunks.front()));
      } else {
        f.add("--pipeline-model-parallel-layout", quoted(megatron_layout(chunks)));
      }
    }
  }
  if (p.pp > 1 && p.layers_per_stage.empty()) {  // the scenario's split rule, as Megatron's flags
    if (s.parallelism.account_for_embedding) f.add("--account-for-embedding-in-pipeline-split");
    if (s.parallelism.account_for_loss) f.add("--account-for-loss-in-pipeline-split");
  }
  if (p.zero_stage == 1) f.add("--use-distributed-optimizer");
  if (p.zero_stage >= 2) {  // Megatron FSDP (megatron/core/distributed/fsdp)
    f.add("--use-megatron-fsdp");
    f.add("--data-parallel-sharding-strategy", p.zero_stage == 2 ? "optim_grads" : "optim_grads_params");
  }
  if (p.dp > 1 && p.overlap_grad_reduce) f.add("--overlap-grad-reduce");
  if (p.dp > 1 && p.zero_stage >= 1 && p.overlap_param_gather) f.add("--overlap-param-gather");
  if (p.tp_comm_overlap) f.add("--tp-comm-overlap");
  if (p.ep_comm_overlap) {  // the pair Megatron-Bridge's MoE recipes set together
    f.add("--overlap-moe-expert-parallel-comm");
    f.add("--delay-wgrad-compute");
  }
  // TransformerConfig.cpu_offloading_num_layers as Megatron-LM's argument parser generates it
  // (arguments.py sets cpu_offloading when it is above 0).
  if (p.activation_offload_layers > 0) f.add("--cpu-offloading-num-layers", str(p.activation_offload_layers));
  if (s.training.cuda_graphs) {
    f.add("--cuda-graph-impl", "transformer_engine");
    if (!cuda_graphs_capture_whole_layer(s.model)) f.add("--cuda-graph-scope", "attn");
  }
  megatron_recompute_flags(p.recompute, f);
  f.add("--micro-batch-size", str(p.micro_batch_size));
  f.add("--global-batch-size", str(s.training.global_batch_size));
  switch (s.training.precision) {
    case Precision::kBf16: f.add("--bf16"); break;
    case Precision::kFp16: f.add("--fp16"); break;
    case Precision::kFp8:
      f.add("--bf16");
      // Megatron-Core's recipes take e4m3 forward and e5m2 gradients ("hybrid"), except MXFP8,
      // whose block scales keep e4m3 for both (Megatron-Bridge's bf16_with_mxfp8_mixed).
      f.add("--fp8-format", fp8_recipe(s.training) == Fp8Recipe::kMxfp8 ? "e4m3" : "hybrid");
      f.add("--fp8-recipe", to_string(fp8_recipe(s.training)));
      break;
    case Precision::kFp32: break;
  }
  // Megatron-LM's gradient type: fp32 for bf16 unless --grad-reduce-in-bf16, fp16 for fp16
  // unless --accumulate-allreduce-grads-in-fp32 (megatron/training/arguments.py).
  const bool fp32_grads = exported_grad_reduce_in_fp32(s, Framework::kMegatron);
  if (s.training.precision == Precision::kFp16 && fp32_grads) f.add("--accumulate-allreduce-grads-in-fp32");
  if ((s.training.precision == Precision::kBf16 || s.training.precision == Precision::kFp8) && !fp32_grads)
    f.add("--grad-reduce-in-bf16");
  if (s.training.cross_entropy_loss_fusion.value_or(true)) f.add("--cross-entropy-loss-fusion");
  megatron_model_flags(s.model, f);
  const int64_t nodes = s.cluster.num_nodes();
  out.text = "#!/bin/bash\n# Megatron-LM (core_v0.19) pretrain_gpt.py arguments written by monarch-sim for \"" + s.name +
             "\" on " + str(p.world_size()) + " GPUs (data parallel " + str(p.dp) +
             ").\n# Add the data, optimizer and checkpoint arguments of the run.\nMONARCH_ARGS=(\n" + f.lines("  ") +
             ")\ntorchrun --nproc-per-node " + str(std::min<int64_t>(p.world_size(), s.cluster.gpus_per_node)) +
             " --nnodes " + str(nodes) + " pretrain_gpt.py \"${MONARCH_ARGS[@]}\" \"$@\"\n";
}

// ----------------------------------------------------------------------------- DeepSpeed

// ZeRO bucket sizes in elements: DeepSpeed 0.19's defaults (deepspeed/runtime/zero/config.py,
// reduce_bucket_size and allgather_bucket_size 5e8, stage3_prefetch_bucket_size 5e7).
constexpr int64_t kDeepspeedReduceBucket_elements = 500000000;
constexpr int64_t kDeepspeedAllgatherBucket_elements = 500000000;
constexpr int64_t kDeepspeedPrefetchBucket_elements = 50000000;

void export_deepspeed(const Scenario& s, const Plan& p, Problems& refuse, ExportedConfig& out) {
  const std::string where = "--to deepspeed";
  if (const std::string why = framework_problem(Framework::kDeepspeed, p); !why.empty()) refuse.push_back({where, why});
  if (p.cp > 1)
    refuse.push_back({where, "Megatron-DeepSpeed splits the sequence with Ulysses (--ds-sequence-parallel-size, "
                             "all-to-all), not ring context parallelism; the plan has cp " + str(p.cp)});
  if (s.training.precision == Precision::kFp8)
    refuse.push_back({where, "Megatron-DeepSpeed has no fp8 training"});
  if (s.model.qk_layernorm)
    refuse.push_back({where, "Megatron-DeepSpeed's attention has no query / key norm (model.qk_layernorm)"});
  if (p.tp_comm_overlap) refuse.push_back({where, "Megatron-DeepSpeed has no TP communication overlap (--tp-comm-overlap)"});
  if (p.ep_comm_overlap)
    refuse.push_back({where, "Megatron-DeepSpeed has no EP communication overlap (--overlap-moe-expert-parallel-comm)"});
  if (p.activation_offload_layers > 0)
    refuse.push_back({where, "Megatron-DeepSpeed has no layer-wise activation offloading (--cpu-offloading-num-layers)"});
  if (s.training.cuda_graphs) refuse.push_back({where, "Megatron-DeepSpeed trains without CUDA graphs (training.cuda_graphs)"});
  if (s.model.is_moe() && s.model.moe_ffn_hidden_size > 0 && s.model.moe_ffn_hidden_size != s.model.ffn_hidden_size)
    refuse.push_back({where, "Megatron-DeepSpeed's experts take --ffn-hidden-size (it has no --moe-ffn-hidden-size); "
                             "the model's expert FFN is " + str(s.model.moe_ffn_hidden_size) + " beside a dense FFN of " +
                             str(s.model.ffn_hidden_size)});
  if (s.model.is_moe() && p.expert_tp() != p.tp && p.expert_tp() != 1)
    refuse.push_back({where, "Megatron-DeepSpeed splits experts over all of TP (--enable-expert-tensor-parallelism) or "
                             "not at all; the plan has expert TP " + str(p.expert_tp()) + " under TP " + str(p.tp)});
  if (p.pp > 1 && !chunk_layers(s, p).empty() && !all_equal(chunk_layers(s, p)))
    refuse.push_back({where, "Megatron-DeepSpeed's pipeline splits layers evenly (partition_method uniform); the plan "
                             "splits them unevenly"});
  const int64_t accumulation = num_micro_batches(s, p);
  std::ostringstream j;
  j << "{\n  \"train_batch_size\": " << s.training.global_batch_size << ",\n  \"train_micro_batch_size_per_gpu\": "
    << p.micro_batch_size << ",\n  \"gradient_accumulation_steps\": " << accumulation << ",\n  \"steps_per_print\": 10,\n"
    << "  \"zero_optimization\": {\n    \"stage\": " << p.zero_stage << ",\n    \"overlap_comm\": "
    << (p.overlap_grad_reduce ? "true" : "false") << ",\n    \"contiguous_gradients\": true,\n    \"reduce_scatter\": true,\n"
    << "    \"reduce_bucket_size\": " << kDeepspeedReduceBucket_elements << ",\n    \"allgather_bucket_size\": "
    << kDeepspeedAllgatherBucket_elements;
  if (p.zero_stage == 3) j << ",\n    \"stage3_prefetch_bucket_size\": " << kDeepspeedPrefetchBucket_elements;
  j << "\n  },\n  \"bf16\": { \"enabled\": " << (s.training.precision == Precision::kBf16 ? "true" : "false")
    << " },\n  \"fp16\": { \"enabled\": " << (s.training.precision == Precision::kFp16 ? "true" : "false") << " }";
  // DeepSpeed reduces in the training dtype unless told otherwise (communication_data_type).
  if (s.training.precision != Precision::kFp32 && exported_grad_reduce_in_fp32(s, Framework::kDeepspeed)) j << ",\n  \"communication_data_type\": \"fp32\"";
  if (p.recompute == Recompute::kFull)
    j << ",\n  \"activation_checkpointing\": {\n    \"partition_activations\": " << (p.tp > 1 ? "true" : "false")
      << ",\n    \"contiguous_memory_optimization\": false,\n    \"cpu_checkpointing\": false\n  }";
  j << "\n}\n";

  // Megatron-DeepSpeed flags (megatron/arguments.py; --deepspeed / --deepspeed_config from
  // deepspeed.add_config_arguments).
  Flags f;
  f.add("--deepspeed");
  f.add("--deepspeed_config", "ds_config.json");
  f.add("--zero-stage", str(p.zero_stage));
  f.add("--tensor-model-parallel-size", str(p.tp));
  f.add("--pipeline-model-parallel-size", str(p.pp));
  if (p.pp == 1) f.add("--no-pipeline-parallel");
  if (p.sequence_parallel) f.add("--sequence-parallel");
  if (p.recompute == Recompute::kSelective) f.add("--recompute-granularity", "selective");
  if (p.recompute == Recompute::kFull) {
    f.add("--checkpoint-activations");
    f.add("--deepspeed-activation-checkpointing");
  }
  f.add("--micro-batch-size", str(p.micro_batch_size));
  f.add("--global-batch-size", str(s.training.global_batch_size));
  if (s.training.precision == Precision::kBf16) f.add("--bf16");
  if (s.training.precision == Precision::kFp16) f.add("--fp16");
  const ModelConfig& m = s.model;
  f.add("--num-layers", str(m.num_layers));
  f.add("--hidden-size", str(m.hidden_size));
  f.add("--num-attention-heads", str(m.num_attention_heads));
  if (m.num_kv_heads > 0 && m.num_kv_heads != m.num_attention_heads) f.add("--num-key-value-heads", str(m.num_kv_heads));
  f.add("--ffn-hidden-size", str(m.ffn_hidden_size));
  f.add("--seq-length", str(m.seq_length));
  f.add("--max-position-embeddings", str(m.seq_length));
  f.add("--vocab-size", str(m.vocab_size));
  if (m.architecture == Architecture::kLlama) {
    f.add("--swiglu");
    f.add("--normalization", "rmsnorm");
    f.add("--use-rotary-position-embeddings");
    f.add("--no-position-embedding");
    f.add("--disable-bias-linear");
  }
  if (!m.tie_embeddings) f.add("--untie-embeddings-and-output-weights");
  // Megatron-DeepSpeed's attention: --use-flash-attn-v2 the flash-attn package (which the cost
  // model runs for flash under deepspeed), --use-flash-attn-v1 the first generation,
  // --use-flash-attn-triton its Triton port, no flag its materialized CoreAttention
  // (import_attention_kernel).
  const AttentionKernel kernel = m.attention_kernel.value_or(AttentionKernel::kFlash);
  if (kernel == AttentionKernel::kFlash || kernel == AttentionKernel::kFlash2) f.add("--use-flash-attn-v2");
  if (kernel == AttentionKernel::kFlash1) f.add("--use-flash-attn-v1");
  if (kernel == AttentionKernel::kFlash1Triton) f.add("--use-flash-attn-triton");
  if (m.is_moe()) {
    f.add("--num-experts", str(m.num_experts));
    f.add("--topk", str(m.moe_top_k));
    f.add("--moe-expert-parallel-size", str(p.ep));
    if (p.tp > 1 && p.expert_tp() == p.tp) f.add("--enable-expert-tensor-parallelism");
    // DeepSpeed's gating (deepspeed/moe/sharded_moe.py top1/top2gating): capacity =
    // ceil(tokens x top_k / experts x capacity_factor) with drop_tokens, every routed token
    // without (--disable-moe-token-dropping).
    if (m.moe_dropless) f.add("--disable-moe-token-dropping");
    else f.add("--moe-train-capacity-factor", num(m.moe_capacity_factor));
    if (m.moe_router_force_load_balancing)
      refuse.push_back({where, "DeepSpeed's gating has no forced load balancing (model.moe_router_force_load_balancing)"});
  }
  out.text = "#!/bin/bash\n# DeepSpeed 0.19 config and Megatron-DeepSpeed pretrain_gpt.py flags written by monarch-sim "
             "for \"" + s.name + "\" on " + str(p.world_size()) + " GPUs (data parallel " + str(p.dp) +
             ").\ncat > ds_config.json <<'EOF'\n" + j.str() + "EOF\nMONARCH_ARGS=(\n" + f.lines("  ") +
             ")\ndeepspeed pretrain_gpt.py \"${MONARCH_ARGS[@]}\" \"$@\"\n";
}

// ----------------------------------------------------------------------------- Megatron-Bridge

void export_bridge(const Scenario& s, const Plan& p, Problems& refuse, ExportedConfig& out) {
  const std::string where = "--to megatron-bridge";
  std::vector<std::string> o;
  auto set = [&](const std::string& k, const std::string& v) { o.push_back(k + "=" + v); };
  auto flag = [](bool b) { return std::string(b ? "true" : "false"); };
  set("model.tensor_model_parallel_size", str(p.tp));
  set("model.pipeline_model_parallel_size", str(p.pp));
  set("model.context_parallel_size", str(p.cp));
  if (s.model.is_moe()) {
    set("model.expert_model_parallel_size", str(p.ep));
    set("model.expert_tensor_parallel_size", str(p.expert_tp()));
  }
  set("model.sequence_parallel", flag(p.sequence_parallel));
  if (p.pp > 1 && p.schedule == Schedule::kGpipe)
    refuse.push_back({where, "Megatron-Core has no GPipe schedule (its pipelines run 1F1B or interleaved 1F1B)"});
  set("model.virtual_pipeline_model_parallel_size", p.vpp > 1 ? str(p.vpp) : "null");
  if (p.pp > 1) {
    const std::vector<int64_t> chunks = chunk_layers(s, p);
    if (chunks.empty())
      refuse.push_back({where, "the plan does not say how its " + str(s.model.num_layers) + " layers split over " +
                               str(p.pp * p.vpp) + " pipeline stages (plan.layers_per_stage is empty)"});
    else if (!all_equal(chunks))
      set("model.pipeline_model_parallel_layout", quoted(megatron_layout(chunks)));
  }
  if (p.pp > 1 && p.layers_per_stage.empty()) {
    if (s.parallelism.account_for_embedding) set("model.account_for_embedding_in_pipeline_split", "true");
    if (s.parallelism.account_for_loss) set("model.account_for_loss_in_pipeline_split", "true");
  }
  if (p.recompute == Recompute::kSelective) set("model.recompute_granularity", "selective");
  if (p.recompute == Recompute::kFull) {
    set("model.recompute_granularity", "full");
    set("model.recompute_method", "uniform");
    set("model.recompute_num_layers", "1");
  }
  const ModelConfig& m = s.model;
  set("model.num_layers", str(m.num_layers));
  set("model.hidden_size", str(m.hidden_size));
  set("model.num_attention_heads", str(m.num_attention_heads));
  set("model.num_query_groups", str(m.num_kv_heads > 0 ? m.num_kv_heads : m.num_attention_heads));
  if (m.head_dim > 0) set("model.kv_channels", str(m.head_dim));
  set("model.ffn_hidden_size", str(m.ffn_hidden_size));
  set("model.vocab_size", str(m.vocab_size));
  set("model.seq_length", str(m.seq_length));
  set("dataset.seq_length", str(m.seq_length));
  set("model.share_embeddings_and_output_weights", flag(m.tie_embeddings));
  const bool llama = m.architecture == Architecture::kLlama;
  set("model.normalization", llama ? "RMSNorm" : "LayerNorm");
  set("model.gated_linear_unit", flag(llama));
  set("model.position_embedding_type", llama ? "rope" : "learned_absolute");
  set("model.add_bias_linear", flag(!llama));
  if (m.hidden_dropout) set("model.hidden_dropout", num(*m.hidden_dropout));
  if (m.attention_dropout) set("model.attention_dropout", num(*m.attention_dropout));
  if (const char* backend = megatron_attention_backend(m)) set("model.attention_backend", backend);
  if (const char* kernel = first_generation_flash(m.attention_kernel))
    refuse.push_back({where, std::string("Megatron-Core has no first-generation FlashAttention backend "
                                         "(model.attention_backend flash, fused, unfused, local or auto); "
                                         "model.attention_kernel is ") +
                                 kernel});
  if (m.qk_layernorm) set("model.qk_layernorm", "true");
  if (m.is_moe()) {
    set("model.num_moe_experts", str(m.num_experts));
    set("model.moe_router_topk", str(m.moe_top_k));
    if (m.moe_ffn_hidden_size > 0) set("model.moe_ffn_hidden_size", str(m.moe_ffn_hidden_size));
    set("model.moe_expert_capacity_factor", m.moe_dropless ? "null" : num(m.moe_capacity_factor));
    if (m.moe_router_force_load_balancing) set("model.moe_router_force_load_balancing", "true");
  }
  set("train.micro_batch_size", str(p.micro_batch_size));
  set("train.global_batch_size", str(s.training.global_batch_size));
  set("ddp.use_distributed_optimizer", flag(p.zero_stage == 1));
  if (p.zero_stage >= 2) {
    set("ddp.use_megatron_fsdp", "true");
    set("ddp.data_parallel_sharding_strategy", p.zero_stage == 2 ? "optim_grads" : "optim_grads_params");
  }
  set("ddp.overlap_grad_reduce", flag(p.overlap_grad_reduce));
  set("ddp.overlap_param_gather", flag(p.zero_stage >= 1 && p.overlap_param_gather));
  set("comm_overlap.tp_comm_overlap", flag(p.tp_comm_overlap));
  if (m.is_moe()) {
    set("comm_overlap.overlap_moe_expert_parallel_comm", flag(p.ep_comm_overlap));
    set("comm_overlap.delay_wgrad_compute", flag(p.ep_comm_overlap));
  }
  // As Megatron-Bridge's performance scripts set it (scripts/performance/utils/helpers.py):
  // activations only.
  set("model.cpu_offloading", flag(p.activation_offload_layers > 0));
  if (p.activation_offload_layers > 0) {
    set("model.cpu_offloading_num_layers", str(p.activation_offload_layers));
    set("model.cpu_offloading_weights", "false");
  }
  set("model.cross_entropy_loss_fusion", flag(s.training.cross_entropy_loss_fusion.value_or(true)));
  if (s.training.cuda_graphs) {
    set("model.cuda_graph_impl", "transformer_engine");
    if (!cuda_graphs_capture_whole_layer(m)) set("model.cuda_graph_scope", "attn");
  }
  // Megatron-Bridge 0.6 recipes (src/megatron/bridge/training/mixed_precision.py, @register).
  switch (s.training.precision) {
    case Precision::kBf16: set("mixed_precision", "bf16_mixed"); break;
    case Precision::kFp16: set("mixed_precision", "fp16_mixed"); break;
    case Precision::kFp8:
      switch (fp8_recipe(s.training)) {
        case Fp8Recipe::kDelayed: set("mixed_precision", "bf16_with_fp8_delayed_scaling_mixed"); break;
        case Fp8Recipe::kTensorwise:
          set("mixed_precision", "bf16_with_fp8_current_scaling_mixed");
          // Its setup() writes first_last_layers_bf16 = True over the model's, so no override
          // turns it off.
          out.warnings.push_back("Megatron-Bridge's bf16_with_fp8_current_scaling_mixed keeps the first and last transformer "
                                 "layers in bf16, which the prediction runs in fp8: set "
                                 "cfg.mixed_precision.first_last_layers_bf16 = False in the recipe to run what was predicted");
          break;
        case Fp8Recipe::kMxfp8: set("mixed_precision", "bf16_with_mxfp8_mixed"); break;
        case Fp8Recipe::kBlockwise: set("mixed_precision", "bf16_with_fp8_subchannel_scaling_mixed"); break;
      }
      break;
    case Precision::kFp32:
      refuse.push_back({where, "Megatron-Bridge 0.6 registers no fp32 mixed_precision recipe"});
      break;
  }
  // The bf16 and fp8 recipes reduce in fp32 (MixedPrecisionConfig.grad_reduce_in_fp32 = True),
  // and their setup() writes it over ddp.grad_reduce_in_fp32, so an override cannot turn it off.
  if (s.training.precision != Precision::kFp16 && s.training.precision != Precision::kFp32 &&
      !exported_grad_reduce_in_fp32(s, Framework::kMegatron))
    out.warnings.push_back("the plan reduces gradients in bf16 (training.grad_reduce_in_fp32 false); Megatron-Bridge's " +
                           std::string(to_string(s.training.precision)) + " mixed_precision recipe reduces in fp32: set "
                           "cfg.mixed_precision.grad_reduce_in_fp32 = False in the recipe, as its performance recipes do");
  std::string text = "# Megatron-Bridge 0.6 scripts/training/run_recipe.py overrides written by monarch-sim for \"" +
                     s.name + "\" on " + str(p.world_size()) + " GPUs (data parallel " + str(p.dp) +
                     ").\n# Launch: torchrun --nproc-per-node " +
                     str(std::min<int64_t>(p.world_size(), s.cluster.gpus_per_node)) + " --nnodes " +
                     str(s.cluster.num_nodes()) +
                     " scripts/training/run_recipe.py --recipe RECIPE --mode pretrain $(grep -v '^#' THIS_FILE)\n";
  for (const auto& line : o) text += line + "\n";
  out.text = text;
}

// ============================================================================= import

// Settings by key; a later setting of a key replaces an earlier one (as on a command line).
class Given {
 public:
  explicit Given(const std::vector<Setting>& settings) {
    for (size_t i = 0; i < settings.size(); ++i) index_[settings[i].key] = i;
    settings_ = &settings;
    used_.assign(settings.size(), false);
  }
  const Setting* find(const std::string& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    used_[it->second] = true;
    last_where_ = (*settings_)[it->second].where;
    return &(*settings_)[it->second];
  }
  // The place of the setting found last: the one an assignment made next comes from.
  const std::string& last_where() const { return last_where_; }
  void forget_where() { last_where_.clear(); }
  // Settings never looked at, in file order; earlier duplicates are reported as replaced.
  void report_rest(ImportedConfig& out) const {
    for (size_t i = 0; i < settings_->size(); ++i) {
      const Setting& s = (*settings_)[i];
      if (used_[i]) continue;
      if (index_.at(s.key) != i) out.left_out.push_back(s.where + ": " + s.key + ": set again later; the later value is used");
      else out.left_out.push_back(s.where + ": " + s.key + ": not used by monarch-sim's plan or model; left out");
    }
  }

 private:
  const std::vector<Setting>* settings_ = nullptr;
  std::map<std::string, size_t> index_;
  std::vector<bool> used_;
  std::string last_where_;
};

std::string unquote(const std::string& v) {
  if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) return v.substr(1, v.size() - 2);
  return v;
}

class Importer {
 public:
  Importer(const std::vector<Setting>& settings, ImportedConfig& out) : given_(settings), out_(out) {}

  std::optional<int64_t> integer(const std::string& key) {
    const Setting* s = given_.find(key);
    if (!s) return std::nullopt;
    const std::string v = unquote(s->value);
    char* end = nullptr;
    const long long x = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != 0) {
      out_.problems.push_back({s->where, key + ": found \"" + s->value + "\", expected an integer"});
      return std::nullopt;
    }
    return x;
  }
  std::optional<double> number(const std::string& key) {
    const Setting* s = given_.find(key);
    if (!s) return std::nullopt;
    const std::string v = unquote(s->value);
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != 0 || !std::isfinite(x)) {
      out_.problems.push_back({s->where, key + ": found \"" + s->value + "\", expected a number"});
      return std::nullopt;
    }
    return x;
  }
  std::optional<std::string> text(const std::string& key) {
    const Setting* s = given_.find(key);
    if (!s) return std::nullopt;
    return unquote(s->value);
  }
  // A bare flag (Megatron) or true/false (TOML, JSON, overrides).
  std::optional<bool> boolean(const std::string& key) {
    const Setting* s = given_.find(key);
    if (!s) return std::nullopt;
    const std::string v = unquote(s->value);
    if (v.empty() || v == "true" || v == "True" || v == "1") return true;
    if (v == "false" || v == "False" || v == "0") return false;
    out_.problems.push_back({s->where, key + ": found \"" + s->value + "\", expected true or false"});
    return std::nullopt;
  }
  const Setting* setting(const std::string& key) { return given_.find(key); }

  void assign(const std::string& path, const std::string& json_value) {
    out_.assignments.push_back(path + "=" + json_value);
    out_.assignment_places.push_back(given_.last_where());
    given_.forget_where();
  }
  void assign_int(const std::string& path, std::optional<int64_t> v) {
    if (v) assign(path, str(*v));
  }
  void left_out(const Setting* s, const std::string& why) {
    if (s) out_.left_out.push_back(s->where + ": " + s->key + ": " + why);
  }
  void problem(const Setting* s, const std::string& message) {
    out_.problems.push_back({s ? s->where : "", (s ? s->key + ": " : "") + message});
  }
  void finish() { given_.report_rest(out_); }

 private:
  Given given_;
  ImportedConfig& out_;
};

// Megatron-Core's attention backend under `key` (Megatron-LM --attention-backend, Megatron-Bridge
// model.attention_backend; megatron_attention_backend writes it).
void import_attention_backend(Importer& in, const std::string& key) {
  const Setting* given = in.setting(key);
  const auto backend = in.text(key);
  if (!backend || *backend == "auto") return;
  if (*backend == "flash") in.assign("model.attention_kernel", "\"flash2\"");
  else if (*backend == "fused") in.assign("model.attention_kernel", "\"flash\"");
  else if (*backend == "unfused" || *backend == "local") in.assign("model.attention_kernel", "\"materialized\"");
  else in.problem(given, "found \"" + *backend + "\", expected flash, fused, unfused, local or auto");
}

// The attention kernel (model.attention_kernel). Megatron-Core's --attention-backend picks
// Transformer Engine's backend through its NVTE_FLASH_ATTN / NVTE_FUSED_ATTN / NVTE_UNFUSED_ATTN
// switches (LanguageModule._set_attention_backend): flash is the flash-attn package, fused
// cuDNN's attention, unfused TE's and local Megatron's own attention, both storing the scores;
// auto leaves TE's own choice (cuDNN on Hopper), the scenario's default; the older
// --use-flash-attn calls the flash-attn package too. Megatron-DeepSpeed (megatron/arguments.py):
// --use-flash-attn-v2 the flash-attn package, --use-flash-attn(-v1) its first generation and
// --use-flash-attn-triton the Triton port; without any of them ParallelAttention runs its
// CoreAttention, which stores the scores (megatron/model/transformer.py).
void import_attention_kernel(Importer& in, bool deepspeed_flags) {
  if (deepspeed_flags) {
    const bool v1 = in.boolean("--use-flash-attn-v1").value_or(false) || in.boolean("--use-flash-attn").value_or(false);
    const bool triton = in.boolean("--use-flash-attn-triton").value_or(false);
    if (in.boolean("--use-flash-attn-v2").value_or(false)) in.assign("model.attention_kernel", "\"flash2\"");
    else if (triton) in.assign("model.attention_kernel", "\"flash1-triton\"");
    else if (v1) in.assign("model.attention_kernel", "\"flash1\"");
    else in.assign("model.attention_kernel", "\"materialized\"");
    return;
  }
  if (!in.setting("--attention-backend") && in.boolean("--use-flash-attn").value_or(false))
    in.assign("model.attention_kernel", "\"flash2\"");
  import_attention_backend(in, "--attention-backend");
}

// CUDA graphs: an implementation other than none (local, transformer_engine), or the deprecated
// enable switch (local). Both capture per layer; a scope narrower than the whole layer is noted.
void import_cuda_graphs(Importer& in, const std::string& impl_key, const std::string& enable_key,
                        const std::string& scope_key) {
  const auto impl = in.text(impl_key);
  const bool graphs = (impl && *impl != "none") || in.boolean(enable_key).value_or(false);
  const auto scope = in.text(scope_key);
  if (!graphs) return;
  in.assign("training.cuda_graphs", "true");
  if (scope && *scope != "full")
    in.left_out(in.setting(scope_key), "monarch-sim captures whole layers (a dropless MoE layer stays eager); a narrower "
                                       "scope is not modelled");
}

std::string json_list(const std::vector<int64_t>& v) {
  std::string o = "[";
  for (size_t i = 0; i < v.size(); ++i) o += (i ? "," : "") + str(v[i]);
  return o + "]";
}

// Megatron's layout string -> transformer layers per model chunk ("" when it is not one).
std::optional<std::vector<int64_t>> parse_megatron_layout(std::string layout) {
  layout.erase(std::remove(layout.begin(), layout.end(), ','), layout.end());
  const std::regex group(R"(\(([^)]+)\)\*(\d+))"), single(R"((.)\*(\d+))");
  for (const std::regex* re : {&group, &single}) {
    std::smatch m;
    std::string s = layout;
    std::string out;
    while (std::regex_search(s, m, *re)) {
      const long n = std::stol(m[2].str());
      if (n < 0 || n > 100000) return std::nullopt;
      out += m.prefix().str();
      for (long i = 0; i < n; ++i) out += m[1].str();
      s = m.suffix().str();
    }
    layout = out + s;
  }
  std::vector<int64_t> chunks(1, 0);
  for (char c : layout) {
    if (c == '|') chunks.push_back(0);
    else if (c == 't') ++chunks.back();
    else if (c != 'E' && c != 'L') return std::nullopt;
  }
  return chunks;
}

// Vocabulary sizes of the tokenizers Megatron's example scripts name when they give no
// --vocab-size: GPT-2's byte-level BPE (gpt2-vocab.json, Radford et al. 2019: 50,257 tokens;
// Megatron pads it for TP, which the model keeps as the unpadded size) and Llama 2's
// SentencePiece model (32,000 tokens, meta-llama/Llama-2-7b-hf config.json vocab_size).
constexpr int64_t kGpt2BpeVocabSize = 50257;
constexpr int64_t kLlama2VocabSize = 32000;

void import_megatron_like(Importer& in, bool deepspeed_flags) {
  // Parallel degrees and pipeline.
  const auto tp = in.integer("--tensor-model-parallel-size");
  in.assign_int("parallelism.tensor_parallel_degree", tp);
  const auto pp = in.integer("--pipeline-model-parallel-size");
  in.assign_int("parallelism.pipeline_parallel_degree", pp);
  if (deepspeed_flags && in.boolean("--no-pipeline-parallel").value_or(false))
    in.assign("parallelism.pipeline_parallel_degree", "1");
  in.assign_int("parallelism.context_parallel_degree", in.integer("--context-parallel-size"));
  in.assign_int("parallelism.expert_parallel_degree", in.integer(deepspeed_flags ? "--moe-expert-parallel-size"
                                                                                 : "--expert-model-parallel-size"));
  if (!deepspeed_flags) in.assign_int("parallelism.expert_tensor_parallel_degree", in.integer("--expert-tensor-parallel-size"));
  if (auto sp = in.boolean("--sequence-parallel")) in.assign("parallelism.sequence_parallel", *sp ? "true" : "false");
  if (auto v = in.integer("--num-virtual-stages-per-pipeline-rank")) in.assign("parallelism.virtual_pipeline_degree", str(*v));
  const Setting* per_chunk = in.setting("--num-layers-per-virtual-pipeline-stage");
  const auto layers = in.integer("--num-layers");
  if (per_chunk) {
    const auto n = in.integer("--num-layers-per-virtual-pipeline-stage");
    if (n && layers && pp && *n > 0 && *layers % (*n * *pp) == 0) in.assign("parallelism.virtual_pipeline_degree", str(*layers / (*n * *pp)));
    else in.problem(per_chunk, "expected --num-layers divisible by this value x --pipeline-model-parallel-size");
  }
  if (auto layout = in.text("--pipeline-model-parallel-layout")) {
    auto chunks = parse_megatron_layout(*layout);
    if (!chunks) in.problem(in.setting("--pipeline-model-parallel-layout"), "found \"" + *layout +
                                                                          "\", expected a layout of E, t, L, | and *N");
    else in.assign("parallelism.layers_per_stage", json_list(*chunks));
  }
  const auto first = in.integer("--decoder-first-pipeline-num-layers");
  const auto last = in.integer("--decoder-last-pipeline-num-layers");
  if ((first || last) && layers && pp && *pp > 1) {
    const int64_t middle_stages = *pp - (first ? 1 : 0) - (last ? 1 : 0);
    const int64_t rest = *layers - first.value_or(0) - last.value_or(0);
    if (middle_stages > 0 && rest % middle_stages != 0) {
      in.problem(in.setting(first ? "--decoder-first-pipeline-num-layers" : "--decoder-last-pipeline-num-layers"),
                 "the other stages' " + str(rest) + " layers do not divide over " + str(middle_stages) + " stages");
    } else {
      std::vector<int64_t> split;
      if (first) split.push_back(*first);
      for (int64_t i = 0; i < middle_stages; ++i) split.push_back(rest / middle_stages);
      if (last) split.push_back(*last);
      in.assign("parallelism.layers_per_stage", json_list(split));
    }
  }
  if (auto v = in.boolean("--account-for-embedding-in-pipeline-split"))
    in.assign("parallelism.account_for_embedding_in_pipeline_split", *v ? "true" : "false");
  if (auto v = in.boolean("--account-for-loss-in-pipeline-split"))
    in.assign("parallelism.account_for_loss_in_pipeline_split", *v ? "true" : "false");

  // Data parallel sharding.
  if (deepspeed_flags) {
    in.assign_int("parallelism.zero_stage", in.integer("--zero-stage"));
    (void)in.boolean("--deepspeed");
    (void)in.text("--deepspeed_config");
  } else {
    const bool fsdp = in.boolean("--use-megatron-fsdp").value_or(false);
    const auto strategy = in.text("--data-parallel-sharding-strategy");
    if (fsdp) {
      const std::string st = strategy.value_or("optim_grads_params");  // Megatron FSDP's default
      const int64_t stage = st == "optim_grads_params" ? 3 : st == "optim_grads" ? 2 : st == "optim" ? 1 : 0;
      in.assign("parallelism.zero_stage", str(stage));
    } else if (in.boolean("--use-distributed-optimizer").value_or(false)) {
      in.assign("parallelism.zero_stage", "1");
    } else {
      in.assign("parallelism.zero_stage", "0");
    }
  }
  for (const char* k : {"--overlap-grad-reduce", "--overlap-param-gather", "--tp-comm-overlap"}) {
    std::string name = std::string(k + 2);
    std::replace(name.begin(), name.end(), '-', '_');
    in.assign("parallelism." + name, in.boolean(k).value_or(false) ? "true" : "false");
  }
  import_cuda_graphs(in, "--cuda-graph-impl", "--enable-cuda-graph", "--cuda-graph-scope");
  if (!deepspeed_flags)  // off unless given (TransformerConfig's default 0)
    in.assign("parallelism.activation_offload_layers", str(in.integer("--cpu-offloading-num-layers").value_or(0)));
  // Recompute.
  const auto granularity = in.text("--recompute-granularity");
  const bool checkpoint_activations = deepspeed_flags && in.boolean("--checkpoint-activations").value_or(false);
  if (deepspeed_flags) (void)in.boolean("--deepspeed-activation-checkpointing");
  if (checkpoint_activations || granularity == "full") {
    in.assign("parallelism.activation_recompute", "\"full\"");
    (void)in.text("--recompute-method");
    if (auto n = in.integer("--recompute-num-layers"); n && *n != 1)
      in.left_out(in.setting("--recompute-num-layers"), "monarch-sim recomputes every layer whole (uniform, 1 layer per group)");
  } else if (granularity == "selective") {
    in.assign("parallelism.activation_recompute", "\"selective\"");
  } else {
    in.assign("parallelism.activation_recompute", "\"none\"");
  }
  // Batch and precision.
  in.assign_int("training.micro_batch_size", in.integer("--micro-batch-size"));
  in.assign_int("training.global_batch_size", in.integer("--global-batch-size"));
  const bool bf16 = in.boolean("--bf16").value_or(false), fp16 = in.boolean("--fp16").value_or(false);
  const auto fp8 = in.text("--fp8-format");
  const auto recipe = in.text("--fp8-recipe");
  in.assign("training.precision", fp8 ? "\"fp8\"" : bf16 ? "\"bf16\"" : fp16 ? "\"fp16\"" : "\"fp32\"");
  // Without --fp8-recipe Megatron-LM runs delayed scaling, the scenario's default for megatron.
  if (fp8 && recipe) in.assign("training.fp8_recipe", "\"" + *recipe + "\"");
  in.assign("training.framework", deepspeed_flags ? "\"deepspeed\"" : "\"megatron\"");
  if (!deepspeed_flags) {
    if (in.boolean("--grad-reduce-in-bf16").value_or(false)) in.assign("training.grad_reduce_in_fp32", "false");
    else if (in.boolean("--accumulate-allreduce-grads-in-fp32").value_or(false)) in.assign("training.grad_reduce_in_fp32", "true");
    // Megatron-LM runs the unfused cross entropy unless told (model_parallel_config.py,
    // cross_entropy_loss_fusion = False); both --cross-entropy-fusion-impl kernels are fused.
    in.assign("training.cross_entropy_loss_fusion",
              in.boolean("--cross-entropy-loss-fusion").value_or(false) ? "true" : "false");
    (void)in.text("--cross-entropy-fusion-impl");
  }

  // Model shape.
  const bool swiglu = in.boolean("--swiglu").value_or(false);
  const auto norm = in.text("--normalization");
  const bool rope = in.text("--position-embedding-type") == "rope" ||
                    (deepspeed_flags && in.boolean("--use-rotary-position-embeddings").value_or(false));
  if (deepspeed_flags) (void)in.boolean("--no-position-embedding");
  (void)in.boolean("--disable-bias-linear");
  const bool llama = swiglu || rope || (norm && (*norm == "RMSNorm" || *norm == "rmsnorm"));
  in.assign("model.architecture", llama ? "\"llama\"" : "\"gpt\"");
  in.assign_int("model.num_layers", layers);
  in.assign_int("model.hidden_size", in.integer("--hidden-size"));
  in.assign_int("model.num_attention_heads", in.integer("--num-attention-heads"));
  (void)in.boolean("--group-query-attention");
  in.assign_int("model.num_kv_heads", in.integer(deepspeed_flags ? "--num-key-value-heads" : "--num-query-groups"));
  in.assign_int("model.head_dim", in.integer("--kv-channels"));
  in.assign_int("model.ffn_hidden_size", in.integer("--ffn-hidden-size"));
  const auto tokenizer = in.text("--tokenizer-type");
  if (auto v = in.integer("--vocab-size")) {
    in.assign("model.vocab_size", str(*v));
  } else if (tokenizer == "GPT2BPETokenizer" || (!tokenizer && in.setting("--merge-file"))) {
    (void)in.setting("--merge-file");
    (void)in.setting("--vocab-file");
    in.assign("model.vocab_size", str(kGpt2BpeVocabSize));
  } else if (tokenizer == "Llama2Tokenizer") {
    in.assign("model.vocab_size", str(kLlama2VocabSize));
  }
  in.assign_int("model.seq_length", in.integer("--seq-length"));
  (void)in.integer("--max-position-embeddings");
  in.assign("model.tie_embeddings", in.boolean("--untie-embeddings-and-output-weights").value_or(false) ? "false" : "true");
  if (auto v = in.number("--hidden-dropout")) in.assign("model.hidden_dropout", num(*v));
  if (auto v = in.number("--attention-dropout")) in.assign("model.attention_dropout", num(*v));
  import_attention_kernel(in, deepspeed_flags);
  if (!deepspeed_flags && in.boolean("--qk-layernorm").value_or(false)) in.assign("model.qk_layernorm", "true");
  in.assign_int("model.num_experts", in.integer("--num-experts"));
  in.assign_int("model.moe_top_k", in.integer(deepspeed_flags ? "--topk" : "--moe-router-topk"));
  in.assign_int("model.moe_ffn_hidden_size", in.integer("--moe-ffn-hidden-size"));
  if (deepspeed_flags) {
    // Megatron-DeepSpeed splits experts over the whole TP group or not at all.
    const bool etp = in.boolean("--enable-expert-tensor-parallelism").value_or(false);
    if (in.setting("--num-experts")) {
      in.assign("parallelism.expert_tensor_parallel_degree", etp ? str(tp.value_or(1)) : "1");
      // Token dropping is on by default, at --moe-train-capacity-factor (default 1.0).
      if (in.boolean("--disable-moe-token-dropping").value_or(false)) in.assign("model.moe_dropless", "true");
      else if (auto cf = in.number("--moe-train-capacity-factor")) in.assign("model.moe_capacity_factor", num(*cf));
    }
  } else if (in.setting("--num-experts")) {
    (void)in.text("--moe-token-dispatcher-type");
    (void)in.boolean("--moe-pad-expert-input-to-capacity");
    if (auto cf = in.number("--moe-expert-capacity-factor")) in.assign("model.moe_capacity_factor", num(*cf));
    else in.assign("model.moe_dropless", "true");
    if (in.boolean("--moe-router-force-load-balancing").value_or(false))
      in.assign("model.moe_router_force_load_balancing", "true");
    // EP communication overlap: off unless the flag is given (Megatron's default).
    in.assign("parallelism.ep_comm_overlap", in.boolean("--overlap-moe-expert-parallel-comm").value_or(false) ? "true" : "false");
    (void)in.boolean("--delay-wgrad-compute");
  }
}

void import_megatron(Importer& in) { import_megatron_like(in, false); }

void import_deepspeed(Importer& in) {
  import_megatron_like(in, true);
  // The DeepSpeed JSON (read after the flags: its values replace theirs where both are given).
  in.assign_int("parallelism.zero_stage", in.integer("zero_optimization.stage"));
  if (auto v = in.boolean("zero_optimization.overlap_comm")) in.assign("parallelism.overlap_grad_reduce", *v ? "true" : "false");
  for (const char* k : {"zero_optimization.contiguous_gradients", "zero_optimization.reduce_scatter",
                        "zero_optimization.reduce_bucket_size", "zero_optimization.allgather_bucket_size",
                        "zero_optimization.stage3_prefetch_bucket_size", "steps_per_print"})
    if (const Setting* s = in.setting(k))
      in.left_out(s, "monarch-sim models DeepSpeed's default buckets and communication switches");
  in.assign_int("training.micro_batch_size", in.integer("train_micro_batch_size_per_gpu"));
  in.assign_int("training.global_batch_size", in.integer("train_batch_size"));
  (void)in.integer("gradient_accumulation_steps");  // implied by the two batch sizes and dp
  if (in.boolean("bf16.enabled").value_or(false)) in.assign("training.precision", "\"bf16\"");
  else if (in.boolean("fp16.enabled").value_or(false)) in.assign("training.precision", "\"fp16\"");
  if (auto c = in.text("communication_data_type")) {
    if (*c == "fp32" || *c == "float32") in.assign("training.grad_reduce_in_fp32", "true");
    else if (*c == "bf16" || *c == "fp16" || *c == "bfloat16" || *c == "float16") in.assign("training.grad_reduce_in_fp32", "false");
    else in.problem(in.setting("communication_data_type"), "found \"" + *c + "\", expected fp32, bf16 or fp16");
  }
  if (in.setting("activation_checkpointing.partition_activations")) {
    (void)in.boolean("activation_checkpointing.partition_activations");
    in.assign("parallelism.activation_recompute", "\"full\"");
  }
  for (const char* k : {"activation_checkpointing.contiguous_memory_optimization", "activation_checkpointing.cpu_checkpointing"})
    (void)in.boolean(k);
}

// torchtitan/distributed/pipeline_parallel.py generate_llm_fqn_per_model_part: the layers of
// each stage when `input_weight` / `output_weight` count the embedding / the output as layers.
// Empty when torchtitan refuses the split.
std::vector<int64_t> torchtitan_split(int64_t num_layers, int64_t stages, int64_t input_weight, int64_t output_weight) {
  if (stages < 1) return {};
  if (stages == 1) return {num_layers};
  const int64_t effective = num_layers + input_weight + output_weight;
  const int64_t per = effective / stages, extra = effective % stages;
  if (stages > effective || per == 0 || input_weight > per || output_weight > per) return {};
  std::vector<int64_t> out;
  int64_t placed = 0;
  for (int64_t i = 0; i < stages; ++i) {
    int64_t n = per + (i < extra ? 1 : 0);
    if (i == 0) n -= input_weight;
    else if (i == stages - 1) n -= output_weight;
    n = std::clamp<int64_t>(n, 0, num_layers - placed);
    out.push_back(n);
    placed += n;
  }
  return out;
}

// Transformer layers of each model part of module_fqns_per_model_part ([["tok_embeddings",
// "layers.0", ...], ...], the TOML array in its JSON spelling).
std::vector<int64_t> torchtitan_fqn_layers(const std::string& value) {
  std::vector<int64_t> chunks;
  int depth = 0;
  for (size_t i = 0; i < value.size(); ++i) {
    const char c = value[i];
    if (c == '[' && ++depth == 2) chunks.push_back(0);
    if (c == ']') --depth;
    if (depth == 2 && value.compare(i, 8, "\"layers.") == 0) ++chunks.back();
  }
  return chunks;
}

void import_torchtitan(Importer& in, int64_t num_gpus, int64_t num_layers) {
  const auto name = in.text("model.name"), flavor = in.text("model.flavor");
  bool known = false;
  for (const auto& f : kTorchtitanFlavors)
    if (name == f.name && flavor == f.flavor) {
      in.assign("model.preset", quoted(f.preset));
      if (num_layers == 0) num_layers = find_model_preset(f.preset)->config.num_layers;
      known = true;
    }
  if (!known && (name || flavor))
    in.left_out(in.setting("model.flavor") ? in.setting("model.flavor") : in.setting("model.name"),
                "no torchtitan v0.2.2 flavor monarch-sim knows (" + name.value_or("?") + " " + flavor.value_or("?") +
                    "); give the model with --model");
  if (const Setting* c = in.setting("model.converters")) {
    if (c->value.find("float8") != std::string::npos) in.assign("training.precision", "\"fp8\"");
    else if (c->value != "[]") in.left_out(c, "only the float8 converters are modelled");
  }
  const auto param = in.text("training.mixed_precision_param");
  if (!in.setting("model.converters") || in.setting("model.converters")->value.find("float8") == std::string::npos)
    in.assign("training.precision", param == "float32" ? "\"fp32\"" : "\"bf16\"");
  if (auto r = in.text("training.mixed_precision_reduce")) {
    if (*r == "float32") in.assign("training.grad_reduce_in_fp32", "true");
    else if (*r == "bfloat16") in.assign("training.grad_reduce_in_fp32", "false");
    else in.problem(in.setting("training.mixed_precision_reduce"), "found \"" + *r + "\", expected float32 or bfloat16");
  }
  in.assign("training.framework", "\"torchtitan\"");
  in.assign_int("model.seq_length", in.integer("training.seq_len"));

  const int64_t tp = in.integer("parallelism.tensor_parallel_degree").value_or(1);
  const int64_t pp = in.integer("parallelism.pipeline_parallel_degree").value_or(1);
  const int64_t cp = in.integer("parallelism.context_parallel_degree").value_or(1);
  const int64_t replicate = in.integer("parallelism.data_parallel_replicate_degree").value_or(1);
  int64_t shard = in.integer("parallelism.data_parallel_shard_degree").value_or(-1);
  if (shard == -1 && tp > 0 && pp > 0 && cp > 0 && replicate > 0) shard = num_gpus / (tp * pp * cp * replicate);
  const int64_t dp = replicate * std::max<int64_t>(shard, 1);
  in.assign("parallelism.tensor_parallel_degree", str(tp));
  in.assign("parallelism.pipeline_parallel_degree", str(pp));
  in.assign("parallelism.context_parallel_degree", str(cp));
  in.assign("parallelism.data_parallel_degree", str(dp));
  // torchtitan's TP plan shards the norms over the sequence whenever tp > 1.
  in.assign("parallelism.sequence_parallel", tp > 1 ? "true" : "false");
  const auto reshard = in.text("parallelism.fsdp_reshard_after_forward");
  if (shard > 1) {
    in.assign("parallelism.zero_stage", reshard == "never" ? "2" : "3");
    if (replicate > 1)
      in.left_out(in.setting("parallelism.data_parallel_replicate_degree"),
                  "HSDP (replicate " + str(replicate) + " x shard " + str(shard) +
                      "): modelled as FSDP over all " + str(dp) + " data-parallel ranks");
  } else {
    in.assign("parallelism.zero_stage", "0");
  }
  if (auto ep = in.integer("parallelism.expert_parallel_degree")) in.assign("parallelism.expert_parallel_degree", str(*ep));
  in.assign_int("parallelism.expert_tensor_parallel_degree", in.integer("parallelism.expert_tensor_parallel_degree"));
  if (auto v = in.boolean("parallelism.enable_async_tensor_parallel")) in.assign("parallelism.tp_comm_overlap", *v ? "true" : "false");
  if (in.boolean("debug.moe_force_load_balance").value_or(false)) in.assign("model.moe_router_force_load_balancing", "true");
  // torch.compile of the blocks: [compile] enable with "model" among its components (torchtitan
  // v0.2); [training] compile in earlier releases.
  if (auto v = in.boolean("compile.enable")) {
    const auto components = in.text("compile.components");
    const bool model = !components || components->find("model") != std::string::npos;
    in.assign("training.compile", *v && model ? "true" : "false");
  } else if (auto legacy = in.boolean("training.compile")) {
    in.assign("training.compile", *legacy ? "true" : "false");
  }

  // Batch: see export_torchtitan.
  const auto local = in.integer("training.local_batch_size");
  const auto micro = in.integer("parallelism.pipeline_parallel_microbatch_size");
  const int64_t mbs = pp > 1 ? micro.value_or(1) : local.value_or(8);  // torchtitan's defaults
  in.assign("training.micro_batch_size", str(mbs));
  const auto global = in.integer("training.global_batch_size");
  in.assign("training.global_batch_size", str(global && *global > 0 ? *global : local.value_or(8) * dp));

  if (pp > 1) {
    const std::string sched = in.text("parallelism.pipeline_parallel_schedule").value_or("1F1B");
    const int64_t layers_per_stage = in.integer("parallelism.pipeline_parallel_layers_per_stage").value_or(0);
    const int64_t first_less = in.integer("parallelism.pipeline_parallel_first_stage_less_layers").value_or(1);
    const int64_t last_less = in.integer("parallelism.pipeline_parallel_last_stage_less_layers").value_or(1);
    if (sched == "1F1B" || sched == "GPipe") {
      in.assign("parallelism.pipeline_schedule", sched == "GPipe" ? "\"gpipe\"" : "\"1f1b\"");
    } else if (sched == "Interleaved1F1B") {
      in.assign("parallelism.pipeline_schedule", "\"interleaved-1f1b\"");
    } else {
      in.left_out(in.setting("parallelism.pipeline_parallel_schedule"),
                  "schedule \"" + sched + "\" is not modelled; the pipeline schedule is searched");
    }
    const Setting* fqns = in.setting("parallelism.module_fqns_per_model_part");
    std::vector<int64_t> chunks;
    if (fqns) {
      chunks = torchtitan_fqn_layers(fqns->value);
    } else if (num_layers > 0) {
      // torchtitan/distributed/pipeline_parallel.py pipeline_llm: one stage per rank for
      // single-stage schedules; else ceil((layers + first + last) / layers_per_stage) stages,
      // or 2 per rank without layers_per_stage.
      const bool single = sched == "1F1B" || sched == "GPipe";
      int64_t stages = single ? pp : 2 * pp;
      if (!single && layers_per_stage > 0) stages = (num_layers + first_less + last_less + layers_per_stage - 1) / layers_per_stage;
      chunks = torchtitan_split(num_layers, stages, first_less, last_less);
      if (chunks.empty())
        in.problem(in.setting("parallelism.pipeline_parallel_degree"),
                   "torchtitan cannot split " + str(num_layers) + " layers over " + str(stages) + " stages");
    } else {
      in.problem(in.setting("parallelism.pipeline_parallel_degree"),
                 "the model's layer count is needed to place the layers on the stages; give --model");
    }
    if (!chunks.empty()) {
      if (chunks.size() % static_cast<size_t>(pp) != 0)
        in.problem(in.setting("parallelism.pipeline_parallel_degree"),
                   str(static_cast<int64_t>(chunks.size())) + " model parts do not divide over " + str(pp) + " ranks");
      const int64_t vpp = static_cast<int64_t>(chunks.size()) / pp;
      in.assign("parallelism.virtual_pipeline_degree", str(std::max<int64_t>(vpp, 1)));
      if (!all_equal(chunks)) in.assign("parallelism.layers_per_stage", json_list(chunks));
    }
  }
  const auto mode = in.text("activation_checkpoint.mode").value_or("selective");  // torchtitan's default
  (void)in.text("activation_checkpoint.selective_ac_option");
  in.assign("parallelism.activation_recompute", mode == "full" ? "\"full\"" : mode == "none" ? "\"none\"" : "\"selective\"");
}

}  // namespace

namespace {

// An fp8 mixed_precision recipe of Megatron-Bridge (mixed_precision.py), named r with '_'
// separators: fp8 training with the recipe's scaling, *_fp8_delayed_scaling_mixed, *_fp8_current_
// scaling_mixed (per tensor), *_mxfp8_mixed and *_fp8_subchannel_scaling_mixed (blockwise).
void import_bridge_fp8_recipe(Importer& in, const std::string& r) {
  in.assign("training.precision", "\"fp8\"");
  if (r.find("current_scaling") != std::string::npos) in.assign("training.fp8_recipe", "\"tensorwise\"");
  else if (r.find("subchannel") != std::string::npos) in.assign("training.fp8_recipe", "\"blockwise\"");
  else if (r.find("mxfp8") != std::string::npos) in.assign("training.fp8_recipe", "\"mxfp8\"");
  else if (r.find("delayed") != std::string::npos) in.assign("training.fp8_recipe", "\"delayed\"");
}

void import_bridge(Importer& in) {
  in.assign_int("parallelism.tensor_parallel_degree", in.integer("model.tensor_model_parallel_size"));
  in.assign_int("parallelism.pipeline_parallel_degree", in.integer("model.pipeline_model_parallel_size"));
  in.assign_int("parallelism.context_parallel_degree", in.integer("model.context_parallel_size"));
  in.assign_int("parallelism.expert_parallel_degree", in.integer("model.expert_model_parallel_size"));
  in.assign_int("parallelism.expert_tensor_parallel_degree", in.integer("model.expert_tensor_parallel_size"));
  if (auto v = in.boolean("model.sequence_parallel")) in.assign("parallelism.sequence_parallel", *v ? "true" : "false");
  if (auto v = in.text("model.virtual_pipeline_model_parallel_size"); v && *v != "null" && *v != "None")
    in.assign_int("parallelism.virtual_pipeline_degree", in.integer("model.virtual_pipeline_model_parallel_size"));
  if (auto layout = in.text("model.pipeline_model_parallel_layout"); layout && *layout != "null") {
    auto chunks = parse_megatron_layout(*layout);
    if (!chunks) in.problem(in.setting("model.pipeline_model_parallel_layout"),
                            "found \"" + *layout + "\", expected a layout of E, t, L, | and *N");
    else in.assign("parallelism.layers_per_stage", json_list(*chunks));
  }
  const auto layers = in.integer("model.num_layers");
  const auto pp = in.integer("model.pipeline_model_parallel_size");
  const auto first = in.integer("model.num_layers_in_first_pipeline_stage");
  const auto last = in.integer("model.num_layers_in_last_pipeline_stage");
  if ((first || last) && layers && pp && *pp > 1) {
    const int64_t middle = *pp - (first ? 1 : 0) - (last ? 1 : 0);
    const int64_t rest = *layers - first.value_or(0) - last.value_or(0);
    if (middle > 0 && rest % middle == 0) {
      std::vector<int64_t> split;
      if (first) split.push_back(*first);
      for (int64_t i = 0; i < middle; ++i) split.push_back(rest / middle);
      if (last) split.push_back(*last);
      in.assign("parallelism.layers_per_stage", json_list(split));
    } else {
      in.problem(in.setting("model.num_layers_in_first_pipeline_stage"), "the other stages' layers do not divide evenly");
    }
  }
  if (auto v = in.boolean("model.account_for_embedding_in_pipeline_split"))
    in.assign("parallelism.account_for_embedding_in_pipeline_split", *v ? "true" : "false");
  if (auto v = in.boolean("model.account_for_loss_in_pipeline_split"))
    in.assign("parallelism.account_for_loss_in_pipeline_split", *v ? "true" : "false");
  const auto granularity = in.text("model.recompute_granularity");
  (void)in.text("model.recompute_method");
  (void)in.integer("model.recompute_num_layers");
  if (granularity)
    in.assign("parallelism.activation_recompute", *granularity == "full" ? "\"full\"" : *granularity == "selective" ? "\"selective\"" : "\"none\"");
  const auto norm = in.text("model.normalization");
  const auto gated = in.boolean("model.gated_linear_unit");
  const auto position = in.text("model.position_embedding_type");
  (void)in.boolean("model.add_bias_linear");
  if (norm || gated || position)
    in.assign("model.architecture", norm == "RMSNorm" || gated.value_or(false) || position == "rope" ? "\"llama\"" : "\"gpt\"");
  in.assign_int("model.num_layers", layers);
  in.assign_int("model.hidden_size", in.integer("model.hidden_size"));
  in.assign_int("model.num_attention_heads", in.integer("model.num_attention_heads"));
  in.assign_int("model.num_kv_heads", in.integer("model.num_query_groups"));
  in.assign_int("model.head_dim", in.integer("model.kv_channels"));
  in.assign_int("model.ffn_hidden_size", in.integer("model.ffn_hidden_size"));
  in.assign_int("model.vocab_size", in.integer("model.vocab_size"));
  in.assign_int("model.seq_length", in.integer("model.seq_length"));
  in.assign_int("model.seq_length", in.integer("dataset.seq_length"));  // the runner copies it to the model
  if (auto v = in.boolean("model.share_embeddings_and_output_weights")) in.assign("model.tie_embeddings", *v ? "true" : "false");
  if (auto v = in.number("model.hidden_dropout")) in.assign("model.hidden_dropout", num(*v));
  if (auto v = in.number("model.attention_dropout")) in.assign("model.attention_dropout", num(*v));
  import_attention_backend(in, "model.attention_backend");
  if (auto v = in.boolean("model.qk_layernorm")) in.assign("model.qk_layernorm", *v ? "true" : "false");
  in.assign_int("model.num_experts", in.integer("model.num_moe_experts"));
  in.assign_int("model.moe_top_k", in.integer("model.moe_router_topk"));
  in.assign_int("model.moe_ffn_hidden_size", in.integer("model.moe_ffn_hidden_size"));
  if (auto v = in.boolean("model.moe_router_force_load_balancing"))
    in.assign("model.moe_router_force_load_balancing", *v ? "true" : "false");
  if (auto cf = in.text("model.moe_expert_capacity_factor")) {
    if (*cf == "null" || *cf == "None") in.assign("model.moe_dropless", "true");
    else if (auto v = in.number("model.moe_expert_capacity_factor")) in.assign("model.moe_capacity_factor", num(*v));
  }
  in.assign_int("training.micro_batch_size", in.integer("train.micro_batch_size"));
  in.assign_int("training.global_batch_size", in.integer("train.global_batch_size"));
  const bool fsdp = in.boolean("ddp.use_megatron_fsdp").value_or(false);
  const auto strategy = in.text("ddp.data_parallel_sharding_strategy");
  const auto distopt = in.boolean("ddp.use_distributed_optimizer");
  if (fsdp) in.assign("parallelism.zero_stage", strategy == "optim_grads" ? "2" : strategy == "optim" ? "1" : "3");
  else if (distopt) in.assign("parallelism.zero_stage", *distopt ? "1" : "0");
  for (const char* k : {"overlap_grad_reduce", "overlap_param_gather"})
    if (auto v = in.boolean(std::string("ddp.") + k)) in.assign(std::string("parallelism.") + k, *v ? "true" : "false");
  if (auto v = in.boolean("comm_overlap.tp_comm_overlap")) in.assign("parallelism.tp_comm_overlap", *v ? "true" : "false");
  if (auto v = in.boolean("comm_overlap.overlap_moe_expert_parallel_comm"))
    in.assign("parallelism.ep_comm_overlap", *v ? "true" : "false");
  (void)in.boolean("comm_overlap.delay_wgrad_compute");
  // Activation offloading: model.cpu_offloading with its layer count, off unless it is set
  // (TransformerConfig's default); weights offloading is a no-op in Transformer Engine 2.x
  // ("Offloading weights is deprecated").
  const bool offload = in.boolean("model.cpu_offloading").value_or(false);
  const int64_t offload_layers = in.integer("model.cpu_offloading_num_layers").value_or(0);
  in.assign("parallelism.activation_offload_layers", str(offload ? offload_layers : 0));
  (void)in.boolean("model.cpu_offloading_weights");
  if (auto v = in.boolean("model.cross_entropy_loss_fusion")) in.assign("training.cross_entropy_loss_fusion", *v ? "true" : "false");
  (void)in.text("model.cross_entropy_fusion_impl");
  import_cuda_graphs(in, "model.cuda_graph_impl", "model.enable_cuda_graph", "model.cuda_graph_scope");
  // The gradients' type: a mixed_precision recipe's setup() writes its own grad_reduce_in_fp32
  // over ddp's, so ddp's counts only without one.
  const auto mp_fp32 = in.boolean("mixed_precision.grad_reduce_in_fp32");
  const auto ddp_fp32 = in.boolean("ddp.grad_reduce_in_fp32");
  if (mp_fp32) in.assign("training.grad_reduce_in_fp32", *mp_fp32 ? "true" : "false");
  else if (ddp_fp32 && in.setting("mixed_precision"))
    in.left_out(in.setting("ddp.grad_reduce_in_fp32"), "the mixed_precision recipe's grad_reduce_in_fp32 replaces ddp's");
  else if (ddp_fp32) in.assign("training.grad_reduce_in_fp32", *ddp_fp32 ? "true" : "false");
  if (auto mp = in.text("mixed_precision")) {
    std::string r = *mp;
    std::replace(r.begin(), r.end(), '-', '_');
    const bool fp8 = r.find("fp8") != std::string::npos;
    if (fp8) import_bridge_fp8_recipe(in, r);
    else if (r.rfind("bf16", 0) == 0) in.assign("training.precision", "\"bf16\"");
    else if (r.rfind("fp16", 0) == 0) in.assign("training.precision", "\"fp16\"");
    else in.problem(in.setting("mixed_precision"), "found \"" + *mp + "\", expected a Megatron-Bridge recipe such as bf16_mixed");
  }
  in.assign("training.framework", "\"megatron\"");
}

}  // namespace

const char* to_string(ConfigFormat f) {
  switch (f) {
    case ConfigFormat::kTorchtitan: return "torchtitan";
    case ConfigFormat::kMegatron: return "megatron";
    case ConfigFormat::kDeepspeed: return "deepspeed";
    case ConfigFormat::kMegatronBridge: return "megatron-bridge";
  }
  return "?";
}

bool parse_config_format(std::string_view name, ConfigFormat* out) {
  for (ConfigFormat f : {ConfigFormat::kTorchtitan, ConfigFormat::kMegatron, ConfigFormat::kDeepspeed,
                         ConfigFormat::kMegatronBridge})
    if (name == to_string(f)) {
      *out = f;
      return true;
    }
  return false;
}

Expected<ExportedConfig> export_plan(const Scenario& scenario, const Plan& plan, ConfigFormat format) {
  Problems refuse;
  ExportedConfig out;
  if (scenario.model.architecture == Architecture::kDlrm)
    return Expected<ExportedConfig>::fail(std::string("--to ") + to_string(format),
                                          "a DLRM model has no transformer-training framework config (TorchRec runs it)");
  switch (format) {
    case ConfigFormat::kTorchtitan: export_torchtitan(scenario, plan, refuse, out); break;
    case ConfigFormat::kMegatron: export_megatron(scenario, plan, refuse, out); break;
    case ConfigFormat::kDeepspeed: export_deepspeed(scenario, plan, refuse, out); break;
    case ConfigFormat::kMegatronBridge: export_bridge(scenario, plan, refuse, out); break;
  }
  if (!refuse.empty()) return refuse;
  // Not a setting of any framework's config but of the launch environment.
  if (scenario.training.cuda_launch_blocking)
    out.warnings.push_back("the scenario runs with training.cuda_launch_blocking, an environment variable no config holds: "
                           "launch with CUDA_LAUNCH_BLOCKING=1 to run what was predicted");
  return out;
}

ImportedConfig import_settings(ConfigFormat format, const std::vector<Setting>& settings, int64_t num_gpus,
                               int64_t num_layers) {
  ImportedConfig out;
  Importer in(settings, out);
  switch (format) {
    case ConfigFormat::kTorchtitan: import_torchtitan(in, num_gpus, num_layers); break;
    case ConfigFormat::kMegatron: import_megatron(in); break;
    case ConfigFormat::kDeepspeed: import_deepspeed(in); break;
    case ConfigFormat::kMegatronBridge: import_bridge(in); break;
  }
  in.finish();
  return out;
}

}  // namespace monarch

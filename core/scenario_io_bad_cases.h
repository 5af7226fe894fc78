// The table of bad scenarios shared by core/scenario_io_test.cc (the reader) and
// tests/cli_test.cc (the same cases through the monarch-sim binary: exit status 2).
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace monarch::testing_cases {

using nlohmann::json;

// A valid scenario: the example of docs/spec/scenario.md with every degree fixed.
inline json base_scenario() {
  return json::parse(R"({
    "name": "gpt3-175b-on-64-a100",
    "model": { "architecture": "gpt", "num_layers": 96, "hidden_size": 12288,
               "num_attention_heads": 96, "vocab_size": 51200, "seq_length": 2048 },
    "cluster": { "gpu": "A100-80GB", "num_gpus": 64, "gpus_per_node": 8,
                 "intra_node": { "bandwidth_GBps": 300, "latency_us": 2 },
                 "inter_node": { "bandwidth_GBps": 25, "nics_per_node": 8, "latency_us": 5,
                                 "topology": "fat-tree", "oversubscription": 1 } },
    "training": { "global_batch_size": 64, "micro_batch_size": 1, "precision": "bf16" },
    "parallelism": { "tp": 8, "pp": 8, "cp": 1, "dp": 1, "vpp": 3, "sequence_parallel": true,
                     "activation_recompute": "selective" }
  })");
}

struct BadCase {
  const char* name;
  std::vector<std::pair<std::string, std::string>> edits;  // JSON pointer -> JSON value, or "DELETE"
  const char* where;    // JSON path the problem must name
  const char* message;  // words the message must contain
};

inline const BadCase kBadCases[] = {
    {"16-bit gradient reduction in fp32 training", {{"/training/precision", "\"fp32\""}, {"/training/grad_reduce_in_fp32", "false"}},
     "/training/grad_reduce_in_fp32", "whose gradients are fp32"},
    {"fp8 recipe without fp8", {{"/training/fp8_recipe", "\"tensorwise\""}}, "/training/fp8_recipe", "needs precision \"fp8\""},
    {"fp8 recipe unknown", {{"/cluster/gpu", "\"H100-SXM\""}, {"/training/precision", "\"fp8\""}, {"/training/fp8_recipe", "\"custom\""}},
     "/training/fp8_recipe", "tensorwise"},
    {"mxfp8 on Hopper", {{"/cluster/gpu", "\"H100-SXM\""}, {"/training/precision", "\"fp8\""}, {"/training/fp8_recipe", "\"mxfp8\""}},
     "/training/fp8_recipe", "no MXFP8 tensor cores"},
    {"delayed scaling under torchtitan", {{"/cluster/gpu", "\"H100-SXM\""}, {"/training/precision", "\"fp8\""}, {"/training/framework", "\"torchtitan\""},
                                          {"/parallelism/vpp", "DELETE"}, {"/training/fp8_recipe", "\"delayed\""}},
     "/training/fp8_recipe", "scales per tensor"},
    {"gradient reduction type not a bool", {{"/training/grad_reduce_in_fp32", "\"bf16\""}}, "/training/grad_reduce_in_fp32", "true or false"},
    {"cuda graphs under torchtitan", {{"/training/cuda_graphs", "true"}, {"/training/framework", "\"torchtitan\""},
                                      {"/model/attention_dropout", "0"}, {"/parallelism/vpp", "DELETE"}},
     "/training/cuda_graphs", "training.framework \"torchtitan\" has none"},
    {"cuda graphs with full recompute", {{"/training/cuda_graphs", "true"}, {"/parallelism/activation_recompute", "\"full\""}},
     "/parallelism/activation_recompute", "full recompute is only supported with full iteration CUDA graph"},
    {"cuda graphs recomputing attention with dropout", {{"/training/cuda_graphs", "true"}},
     "/parallelism/activation_recompute", "attention dropout"},
    {"torch.compile under megatron", {{"/training/compile", "true"}}, "/training/compile",
     "training.framework \"megatron\" has none"},
    {"power limit above the TDP", {{"/cluster/gpu", R"({"name": "A100-80GB", "power_limit_W": 500})"}},
     "/cluster/gpu/power_limit_W", "at most the board's TDP of 400 W"},
    {"power limit of a custom GPU without its TDP",
     {{"/cluster/gpu", R"({"name": "X1", "peak_tflops": {"bf16": 100}, "memory_gib": 40, "memory_bandwidth_GBps": 1000,
                          "power_limit_W": 300})"}},
     "/cluster/gpu/power_limit_W", "add tdp_W"},
    {"zero power limit", {{"/cluster/gpu", R"({"name": "A100-80GB", "power_limit_W": 0})"}},
     "/cluster/gpu/power_limit_W", "found 0"},
    {"model missing", {{"/model", "DELETE"}}, "/model", "missing"},
    {"model not an object", {{"/model", "5"}}, "/model", "expected an object"},
    {"misspelled top-level key", {{"/modle", "{}"}}, "/modle", "did you mean \"model\""},
    {"misspelled model key", {{"/model/hiden_size", "4096"}}, "/model/hiden_size", "did you mean \"hidden_size\""},
    {"hidden size as a string", {{"/model/hidden_size", "\"12288\""}}, "/model/hidden_size", "a string"},
    {"negative hidden size", {{"/model/hidden_size", "-4"}}, "/model/hidden_size", "found -4"},
    {"zero hidden size", {{"/model/hidden_size", "0"}}, "/model/hidden_size", "found 0"},
    {"absurd hidden size", {{"/model/hidden_size", "1e12"}}, "/model/hidden_size", "<= 1048576"},
    {"fractional hidden size", {{"/model/hidden_size", "12288.5"}}, "/model/hidden_size", "not a fraction"},
    {"num_layers missing", {{"/model/num_layers", "DELETE"}}, "/model/num_layers", "missing"},
    {"misspelled architecture", {{"/model/architecture", "\"gtp\""}}, "/model/architecture", "did you mean \"gpt\""},
    {"architecture missing", {{"/model/architecture", "DELETE"}}, "/model/architecture", "missing"},
    {"unknown model preset", {{"/model/preset", "\"gpt3-175\""}}, "/model/preset", "did you mean \"gpt3-175b\""},
    {"hf_config file missing", {{"/model/hf_config", "\"no/such/config.json\""}}, "/model/hf_config", "does not exist"},
    {"llama without ffn size", {{"/model/architecture", "\"llama\""}}, "/model/ffn_hidden_size", "required for llama"},
    {"hidden not a multiple of heads", {{"/model/num_attention_heads", "100"}}, "/model/hidden_size", "multiple of num_attention_heads"},
    {"kv heads do not divide heads", {{"/model/num_kv_heads", "5"}}, "/model/num_kv_heads", "divisor of num_attention_heads"},
    {"tp does not divide heads", {{"/model/num_attention_heads", "12"}}, "/parallelism/tp", "num_attention_heads (12)"},
    {"tp does not divide kv heads", {{"/model/num_kv_heads", "4"}}, "/parallelism/tp", "num_kv_heads (4)"},
    {"degrees do not multiply to num_gpus", {{"/parallelism/dp", "2"}}, "/parallelism", "cluster.num_gpus (64)"},
    {"more stages than layers", {{"/model/num_layers", "4"}, {"/parallelism/vpp", "DELETE"}}, "/parallelism/pp", "at most num_layers (4)"},
    {"batch not divisible by micro x dp", {{"/training/global_batch_size", "63"}, {"/parallelism/tp", "1"}, {"/parallelism/dp", "8"}, {"/model/num_attention_heads", "96"}}, "/training/global_batch_size", "multiple of micro_batch_size x data_parallel_degree"},
    {"micro batch above global batch", {{"/training/micro_batch_size", "128"}}, "/training/micro_batch_size", "at most global_batch_size"},
    {"absurd GPU count", {{"/cluster/num_gpus", "1e15"}}, "/cluster/num_gpus", "<= 4194304"},
    {"GPU count beyond 64 bits", {{"/cluster/num_gpus", "18446744073709551615"}}, "/cluster/num_gpus", "<= 4194304"},
    {"unknown GPU preset", {{"/cluster/gpu", "\"H100\""}}, "/cluster/gpu", "did you mean \"H100-SXM\""},
    {"custom GPU without memory", {{"/cluster/gpu", R"({"name": "X1", "peak_tflops": {"bf16": 100}, "memory_bandwidth_GBps": 1000})"}}, "/cluster/gpu/memory_gib", "missing"},
    {"misspelled peak key", {{"/cluster/gpu", R"({"name": "A100-80GB", "peak_tflops": {"bfl16": 100}})"}}, "/cluster/gpu/peak_tflops/bfl16", "did you mean \"bf16\""},
    {"zero stage 4", {{"/parallelism/zero_stage", "4"}}, "/parallelism/zero_stage", "0..3"},
    {"unknown schedule", {{"/parallelism/pipeline_schedule", "\"zigzag\""}}, "/parallelism/pipeline_schedule", "one of gpipe, 1f1b, interleaved-1f1b"},
    {"1f1b with virtual stages", {{"/parallelism/pipeline_schedule", "\"1f1b\""}}, "/parallelism/pipeline_schedule", "interleaved-1f1b"},
    {"more model chunks than layers", {{"/parallelism/vpp", "13"}}, "/parallelism/vpp", "at most num_layers (96)"},
    {"vpp without pipeline", {{"/parallelism/pp", "1"}, {"/parallelism/dp", "8"}}, "/parallelism/vpp", "expected 1 when pipeline_parallel_degree is 1"},
    {"degree given twice", {{"/parallelism/tensor_parallel_degree", "8"}}, "/parallelism/tp", "a second time"},
    {"fp8 on a GPU without fp8", {{"/training/precision", "\"fp8\""}}, "/training/precision", "no FP8 tensor cores"},
    {"unknown precision", {{"/training/precision", "\"bfloat16\""}}, "/training/precision", "one of fp32, bf16, fp16, fp8"},
    {"misspelled optimizer", {{"/training/optimizer", "\"adan\""}}, "/training/optimizer", "did you mean \"adam\""},
    {"unknown backend", {{"/backends", R"(["analytical", "ns3"])"}}, "/backends/1", "one of analytical, simgrid, real-cpu, real-gpu"},
    {"backends not a list", {{"/backends", "\"analytical\""}}, "/backends", "non-empty array"},
    {"backend twice", {{"/backends", R"(["simgrid", "simgrid"])"}}, "/backends/1", "twice"},
    {"top_k zero", {{"/search/top_k", "0"}}, "/search/top_k", "found 0"},
    {"unknown objective", {{"/search/objective", "\"throughput\""}}, "/search/objective", "one of iteration_time, memory"},
    {"oversubscription below 1", {{"/cluster/inter_node/oversubscription", "0.5"}}, "/cluster/inter_node/oversubscription", ">= 1"},
    {"unknown topology", {{"/cluster/inter_node/topology", "\"torus\""}}, "/cluster/inter_node/topology", "one of fat-tree"},
    {"negative NVLink bandwidth", {{"/cluster/intra_node/bandwidth_GBps", "-300"}}, "/cluster/intra_node/bandwidth_GBps", "> 0"},
    {"latency as a string", {{"/cluster/intra_node/latency_us", "\"2us\""}}, "/cluster/intra_node/latency_us", "a string"},
    {"training missing", {{"/training", "DELETE"}}, "/training", "missing"},
    {"global batch missing", {{"/training/global_batch_size", "DELETE"}}, "/training/global_batch_size", "missing"},
    {"sequence_parallel not a bool", {{"/parallelism/sequence_parallel", "\"yes\""}}, "/parallelism/sequence_parallel", "true or false"},
    {"cp does not split the sequence", {{"/model/seq_length", "2050"}, {"/parallelism/cp", "2"}, {"/parallelism/pp", "4"}}, "/parallelism/cp", "seq_length (2050)"},
    {"expert parallel on a dense model", {{"/parallelism/ep", "2"}}, "/parallelism/ep", "dense model"},
    {"moe top-k above experts", {{"/model/num_experts", "8"}, {"/model/moe_top_k", "9"}}, "/model/moe_top_k", "at most num_experts (8)"},
    {"moe without top-k", {{"/model/num_experts", "8"}}, "/model/moe_top_k", "missing"},
    {"expert tp on a dense model", {{"/parallelism/etp", "2"}}, "/parallelism/etp", "dense model"},
    {"expert tp zero", {{"/parallelism/expert_tensor_parallel_degree", "0"}}, "/parallelism/expert_tensor_parallel_degree", "found 0"},
    {"expert tp given twice", {{"/parallelism/etp", "2"}, {"/parallelism/expert_tensor_parallel_size", "2"}}, "/parallelism/expert_tensor_parallel_size", "a second time"},
    {"expert tp does not split the expert ffn", {{"/model/num_experts", "8"}, {"/model/moe_top_k", "2"}, {"/model/moe_ffn_hidden_size", "1002"}, {"/parallelism/etp", "4"}}, "/parallelism/etp", "moe_ffn_hidden_size = 1002"},
    {"expert tp x ep does not tile a stage", {{"/model/num_experts", "8"}, {"/model/moe_top_k", "2"}, {"/parallelism/ep", "2"}, {"/parallelism/expert_tensor_parallel_size", "8"}}, "/parallelism/expert_tensor_parallel_size", "tp x cp x dp = 8"},
    {"straggler GPU out of range", {{"/whatif", R"({"stragglers": [{"gpu": 64, "slowdown": 2}]})"}}, "/whatif/stragglers/0/gpu", "0..63"},
    {"straggler speeds up", {{"/whatif", R"({"stragglers": [{"gpu": 3, "slowdown": 0.5}]})"}}, "/whatif/stragglers/0/slowdown", ">= 1"},
    {"straggler names gpu and node", {{"/whatif", R"({"stragglers": [{"gpu": 3, "node": 1, "slowdown": 2}]})"}}, "/whatif/stragglers/0", "exactly one"},
    {"degraded link above 1", {{"/whatif", R"({"degraded_links": [{"node": 1, "bandwidth_factor": 2}]})"}}, "/whatif/degraded_links/0/bandwidth_factor", "<= 1"},
    {"degraded link node out of range", {{"/whatif", R"({"degraded_links": [{"node": 8, "bandwidth_factor": 0.5}]})"}}, "/whatif/degraded_links/0/node", "0..7"},
    {"reliability preset unknown", {{"/reliability", R"({"preset": "llama2", "storage": {"write_GBps": 100, "read_GBps": 100}, "reschedule_s": 300, "startup_s": 120})"}}, "/reliability/preset", "llama3-405b"},
    {"reliability without rates", {{"/reliability", R"({"storage": {"write_GBps": 100, "read_GBps": 100}, "reschedule_s": 300, "startup_s": 120})"}}, "/reliability", "failure_rates"},
    {"reliability storage missing", {{"/reliability", R"({"preset": "llama3-405b", "reschedule_s": 300, "startup_s": 120})"}}, "/reliability/storage", "write_GBps"},
    {"reliability write bandwidth zero", {{"/reliability", R"({"preset": "llama3-405b", "storage": {"write_GBps": 0, "read_GBps": 100}, "reschedule_s": 300, "startup_s": 120})"}}, "/reliability/storage/write_GBps", "> 0"},
    {"reliability restart time missing", {{"/reliability", R"({"preset": "llama3-405b", "storage": {"write_GBps": 100, "read_GBps": 100}, "startup_s": 120})"}}, "/reliability/reschedule_s", "missing"},
    {"reliability interval a word", {{"/reliability", R"({"preset": "llama3-405b", "storage": {"write_GBps": 100, "read_GBps": 100}, "reschedule_s": 300, "startup_s": 120, "checkpoint": {"interval_s": "hourly"}})"}}, "/reliability/checkpoint/interval_s", "optimal"},
    {"reliability recovery unknown", {{"/reliability", R"({"preset": "llama3-405b", "storage": {"write_GBps": 100, "read_GBps": 100}, "reschedule_s": 300, "startup_s": 120, "recovery": "heal"})"}}, "/reliability/recovery", "replica"},
    {"reliability cause with rate and mtbf", {{"/reliability", R"({"preset": "llama3-405b", "storage": {"write_GBps": 100, "read_GBps": 100}, "reschedule_s": 300, "startup_s": 120, "failure_rates": [{"name": "x", "per_day_per_1k_gpus": 1, "mtbf_hours": 5, "per": "gpu"}]})"}}, "/reliability/failure_rates/0", "exactly one"},
    {"reliability mtbf without unit", {{"/reliability", R"({"preset": "llama3-405b", "storage": {"write_GBps": 100, "read_GBps": 100}, "reschedule_s": 300, "startup_s": 120, "failure_rates": [{"name": "x", "mtbf_hours": 5000}]})"}}, "/reliability/failure_rates/0/per", "missing"},
    {"reliability spares without repair time", {{"/reliability", R"({"preset": "llama3-405b", "storage": {"write_GBps": 100, "read_GBps": 100}, "reschedule_s": 300, "startup_s": 120, "spares": {"nodes": 8}})"}}, "/reliability/spares/repair_s", "missing"},
    {"reliability spares negative", {{"/reliability", R"({"preset": "llama3-405b", "storage": {"write_GBps": 100, "read_GBps": 100}, "reschedule_s": 300, "startup_s": 120, "spares": {"nodes": -1, "repair_s": 3600}})"}}, "/reliability/spares/nodes", "found -1"},
    {"reliability unknown component", {{"/reliability", R"({"preset": "llama3-405b", "storage": {"write_GBps": 100, "read_GBps": 100}, "reschedule_s": 300, "startup_s": 120, "failure_rates": [{"name": "x", "component": "fan", "per_day_per_1k_gpus": 1}]})"}}, "/reliability/failure_rates/0/component", "gpu"},
    {"reliability zero trials", {{"/reliability", R"({"preset": "llama3-405b", "storage": {"write_GBps": 100, "read_GBps": 100}, "reschedule_s": 300, "startup_s": 120, "monte_carlo": {"trials": 0}})"}}, "/reliability/monte_carlo/trials", "found 0"},
    {"injected failure of an unknown component", {{"/reliability", R"({"preset": "llama3-405b", "storage": {"write_GBps": 100, "read_GBps": 100}, "reschedule_s": 300, "startup_s": 120, "inject_failure": {"component": "switch", "node": 0, "at_s": 1}})"}}, "/reliability/inject_failure/component", "\"link\""},
    {"injected failure on a node outside the cluster", {{"/reliability", R"({"preset": "llama3-405b", "storage": {"write_GBps": 100, "read_GBps": 100}, "reschedule_s": 300, "startup_s": 120, "inject_failure": {"component": "host", "node": 100000, "at_s": 1}})"}}, "/reliability/inject_failure/node", "node index"},
    {"injected failure without a time", {{"/reliability", R"({"preset": "llama3-405b", "storage": {"write_GBps": 100, "read_GBps": 100}, "reschedule_s": 300, "startup_s": 120, "inject_failure": {"component": "host", "node": 0}})"}}, "/reliability/inject_failure/at_s", "missing"},
    {"injected failure with an unknown key", {{"/reliability", R"({"preset": "llama3-405b", "storage": {"write_GBps": 100, "read_GBps": 100}, "reschedule_s": 300, "startup_s": 120, "inject_failure": {"component": "link", "node": 0, "at_s": 1, "nic": 2}})"}}, "/reliability/inject_failure/nic", "unknown key"},
    {"reliability unknown key", {{"/reliability", R"({"preset": "llama3-405b", "storage": {"write_GBps": 100, "read_GBps": 100}, "reschedule_s": 300, "startup_s": 120, "mtbf": 5})"}}, "/reliability/mtbf", "unknown key"},
    {"time to train without reliability", {{"/search", R"({"objective": "time_to_train"})"}, {"/training/total_tokens", "1e12"}}, "/search/objective", "reliability block"},
    {"time to train without a token target", {{"/search", R"({"objective": "time_to_train"})"}, {"/reliability", R"({"preset": "llama3-405b", "storage": {"write_GBps": 100, "read_GBps": 100}, "reschedule_s": 300, "startup_s": 120})"}}, "/search/objective", "total_tokens"},
    {"total tokens zero", {{"/training/total_tokens", "0"}}, "/training/total_tokens", "> 0"},
    {"name not a string", {{"/name", "5"}}, "/name", "a string"},
    {"steps zero", {{"/training/steps", "0"}}, "/training/steps", "found 0"},
    {"absurd vocabulary", {{"/model/vocab_size", "1e30"}}, "/model/vocab_size", "<= 16777216"},
    {"dp below -1", {{"/parallelism/dp", "-2"}}, "/parallelism/dp", "-1 (derived)"},
    {"seq length as a bool", {{"/model/seq_length", "true"}}, "/model/seq_length", "a boolean"},
    {"tie_embeddings not a bool", {{"/model/tie_embeddings", "\"no\""}}, "/model/tie_embeddings", "true or false"},
    {"gpu profile missing", {{"/cluster/gpu", R"({"name": "A100-80GB", "profile": "/nonexistent/profile.json"})"}}, "/cluster/gpu/profile", "calibration profile \"/nonexistent/profile.json\""},
    {"transformer key on a dlrm model", {{"/model/architecture", "\"dlrm\""}}, "/model/num_layers", "not used by a dlrm model"},
    {"embedding sharding on a transformer", {{"/parallelism/embedding_sharding", "\"t0:dp\""}}, "/parallelism/embedding_sharding",
     "only for architecture dlrm"},
    {"capacity factor given twice differently", {{"/model/moe_capacity_factor", "1.25"}, {"/training/moe_capacity_factor", "2"}}, "/training/moe_capacity_factor", "/model/moe_capacity_factor is 1.25"},
    {"dropless on a dense model", {{"/model/moe_dropless", "true"}}, "/model/moe_dropless", "the model is dense"},
    {"dropless not a bool", {{"/model/num_experts", "8"}, {"/model/moe_top_k", "2"}, {"/model/moe_dropless", "1"}}, "/model/moe_dropless", "true or false"},
    {"dropless with a capacity factor", {{"/model/num_experts", "8"}, {"/model/moe_top_k", "2"}, {"/model/moe_capacity_factor", "1.25"}, {"/model/moe_dropless", "true"}}, "/model/moe_dropless", "no capacity"},
    {"dropless with a training capacity factor", {{"/model/num_experts", "8"}, {"/model/moe_top_k", "2"}, {"/training/moe_capacity_factor", "2"}, {"/model/moe_dropless", "true"}}, "/training/moe_capacity_factor", "moe_dropless is true"},
    {"qk layernorm not a bool", {{"/model/qk_layernorm", "\"yes\""}}, "/model/qk_layernorm", "true or false"},
    {"forced load balancing on a dense model", {{"/model/moe_router_force_load_balancing", "true"}}, "/model/moe_router_force_load_balancing", "the model is dense"},
    {"ep overlap on a dense model", {{"/parallelism/ep_comm_overlap", "true"}}, "/parallelism/ep_comm_overlap", "needs expert parallelism"},
    {"ep overlap not a bool", {{"/parallelism/ep_comm_overlap", "1"}}, "/parallelism/ep_comm_overlap", "true or false"},
    {"ep overlap with full recompute", {{"/model/num_experts", "8"}, {"/model/moe_top_k", "2"}, {"/parallelism/ep", "8"}, {"/parallelism/activation_recompute", "\"full\""}, {"/parallelism/ep_comm_overlap", "true"}},
     "/parallelism/ep_comm_overlap", "does not run with full recompute"},
    {"ep overlap with a pipeline but no virtual stages", {{"/model/num_experts", "8"}, {"/model/moe_top_k", "2"}, {"/parallelism/ep", "8"}, {"/parallelism/vpp", "1"}, {"/parallelism/ep_comm_overlap", "true"}},
     "/parallelism/ep_comm_overlap", "needs virtual pipeline stages"},
    {"ep overlap under torchtitan", {{"/model/num_experts", "8"}, {"/model/moe_top_k", "2"}, {"/parallelism/ep", "8"}, {"/training/framework", "\"torchtitan\""}, {"/parallelism/ep_comm_overlap", "true"}},
     "/parallelism/ep_comm_overlap", "torchtitan has none"},
    {"activation offload with a pipeline", {{"/parallelism/activation_recompute", "\"none\""}, {"/parallelism/activation_offload_layers", "10"}},
     "/parallelism/activation_offload_layers", "does not run with pipeline parallelism"},
    {"activation offload with recompute", {{"/parallelism/pp", "1"}, {"/parallelism/vpp", "1"}, {"/parallelism/dp", "8"}, {"/parallelism/activation_offload_layers", "10"}},
     "/parallelism/activation_offload_layers", "does not run with recompute"},
    {"activation offload of every layer", {{"/parallelism/pp", "1"}, {"/parallelism/vpp", "1"}, {"/parallelism/dp", "8"}, {"/parallelism/activation_recompute", "\"none\""}, {"/parallelism/activation_offload_layers", "96"}},
     "/parallelism/activation_offload_layers", "fewer layers than the model's 96"},
    {"activation offload negative", {{"/parallelism/activation_offload_layers", "-1"}}, "/parallelism/activation_offload_layers", "an integer >= 0"},
    {"activation offload under torchtitan", {{"/parallelism/pp", "1"}, {"/parallelism/vpp", "1"}, {"/parallelism/dp", "8"}, {"/parallelism/activation_recompute", "\"none\""}, {"/training/framework", "\"torchtitan\""}, {"/parallelism/activation_offload_layers", "10"}},
     "/parallelism/activation_offload_layers", "torchtitan has none"},
    {"head_dim zero", {{"/model/head_dim", "0"}}, "/model/head_dim", "found 0"},
    {"hidden dropout of 1", {{"/model/hidden_dropout", "1"}}, "/model/hidden_dropout", "a probability >= 0 and < 1"},
    {"negative attention dropout", {{"/model/attention_dropout", "-0.1"}}, "/model/attention_dropout", "a probability >= 0 and < 1"},
    {"attention dropout as a string", {{"/model/attention_dropout", "\"0.1\""}}, "/model/attention_dropout", "a probability"},
    {"version 2", {{"/version", "2"}}, "/version", "scenario format version"},
    {"layers_per_stage not summing", {{"/parallelism/vpp", "DELETE"}, {"/parallelism/layers_per_stage", "[12, 12, 12, 12, 12, 12, 12, 11]"}}, "/parallelism/layers_per_stage", "sums to 95 layers, expected num_layers (96)"},
    {"negative layer count", {{"/parallelism/vpp", "DELETE"}, {"/parallelism/layers_per_stage", "[12, 12, 12, 12, 12, 12, -12, 36]"}}, "/parallelism/layers_per_stage/6", "found -12"},
    {"zero layers on a stage", {{"/parallelism/vpp", "DELETE"}, {"/parallelism/layers_per_stage", "[0, 12, 12, 12, 12, 12, 12, 24]"}}, "/parallelism/layers_per_stage/0", "positive integer"},
    {"layers_per_stage of the wrong length", {{"/parallelism/layers_per_stage", "[12, 12, 12, 12, 12, 12, 12, 12]"}}, "/parallelism/layers_per_stage", "expected pipeline_parallel_degree x virtual_pipeline_degree (8 x 3 = 24)"},
    {"layers_per_stage not a list", {{"/parallelism/layers_per_stage", "12"}}, "/parallelism/layers_per_stage", "array of layer counts"},
    {"account flag beside layers_per_stage", {{"/parallelism/vpp", "DELETE"}, {"/parallelism/layers_per_stage", "[11, 12, 12, 13, 13, 12, 12, 11]"}, {"/parallelism/account_for_loss_in_pipeline_split", "true"}}, "/parallelism/account_for_loss_in_pipeline_split", "layers_per_stage fixes the split"},
    {"account flag not a boolean", {{"/parallelism/account_for_embedding_in_pipeline_split", "1"}}, "/parallelism/account_for_embedding_in_pipeline_split", "true or false"},
    {"unknown framework", {{"/training/framework", "\"megatron-lm\""}}, "/training/framework", "one of megatron, deepspeed, torchtitan"},
    {"interleaving pinned on deepspeed", {{"/training/framework", "\"deepspeed\""}}, "/parallelism/vpp", "no interleaved schedule"},
    {"gpipe pinned on deepspeed", {{"/training/framework", "\"deepspeed\""}, {"/parallelism/vpp", "1"}, {"/parallelism/pipeline_schedule", "\"gpipe\""}}, "/parallelism/pipeline_schedule", "1F1B TrainSchedule"},
    {"zero-3 with a pipeline on deepspeed", {{"/training/framework", "\"deepspeed\""}, {"/parallelism/vpp", "1"}, {"/parallelism/zero_stage", "3"}}, "/parallelism/zero_stage", "incompatible with pipeline parallelism"},
    {"zero-1 with data parallelism on torchtitan", {{"/training/framework", "\"torchtitan\""}, {"/parallelism/dp", "2"}, {"/parallelism/pp", "4"}, {"/parallelism/vpp", "2"}, {"/parallelism/zero_stage", "1"}}, "/parallelism/zero_stage", "no optimizer-only sharding"},
    {"unknown activation", {{"/model/activation", "\"relu\""}}, "/model/activation", "one of gelu, swiglu, squared-relu"},
    {"misspelled attention kernel", {{"/model/attention_kernel", "\"flsh\""}}, "/model/attention_kernel", "did you mean \"flash\""},
};

// Short names in test listings instead of the bytes of the struct.
inline void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

// base_scenario() with the case's edits applied.
inline json apply_edits(const BadCase& c) {
  json j = base_scenario();
  for (const auto& [ptr, value] : c.edits) {
    json::json_pointer p(ptr);
    if (value == "DELETE") {
      j[p.parent_pointer()].erase(p.back());
    } else {
      j[p] = json::parse(value);
    }
  }
  return j;
}

}  // namespace monarch::testing_cases

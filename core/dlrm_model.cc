#include "core/dlrm_model.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <set>

#include "core/cost_model.h"
#include "core/model_math.h"
#include "core/placement.h"

namespace monarch {

// FBGEMM's table-batched embedding (TBE) kernels gather 128-d rows (256-512 B) at random
// addresses and are HBM-bandwidth bound (Mudigere et al., "Software-Hardware Co-design for
// Fast and Scalable Training of Deep Learning Recommendation Models", ISCA 2022); random
// row gathers sustain well below a streaming copy. 0.5 of peak is an ESTIMATE, not a fit and
// not yet measured: monarch-calibrate has no TBE probe, so it is the same for every GPU kind.
const double kEmbeddingGatherEfficiency = 0.5;
// TorchRec KeyedJaggedTensor values are int64 ids (torchrec/sparse/jagged_tensor.py).
const int64_t kSparseIdBytes = 8;
// fbgemm_gpu SplitTableBatchedEmbeddingBagsCodegen's default cache_load_factor (0.2): the
// HBM cache of a MANAGED_CACHING table holds a fifth of its rows; TorchRec's planner sizes
// FUSED_UVM_CACHING shards with the same default.
const double kUvmCacheLoadFactor = 0.2;

namespace {

constexpr double kBytesPerGib = 1024.0 * 1024.0 * 1024.0;
// Optimizer state of FBGEMM's fused TBE optimizers (fbgemm_gpu EmbOptimType; TorchRec passes
// the table's optimizer into the TBE kernel): row-wise Adagrad keeps one fp32 accumulator per
// row (EXACT_ROWWISE_ADAGRAD), Adagrad one fp32 per element (EXACT_ADAGRAD), Adam fp32 first
// and second moments per element (ADAM), SGD (EXACT_SGD) nothing.
constexpr double kRowwiseAdagradStateBytesPerRow = 4.0;
constexpr double kAdagradStateBytesPerElement = 4.0;
constexpr double kAdamStateBytesPerElement = 8.0;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Distinct rows among `lookups` uniform draws from `rows` rows: rows x (1 - (1 - 1/rows)^lookups).
// FBGEMM's TBE backward sorts the batch's ids and applies the fused optimizer once per distinct
// row (split_embedding_backward_codegen: linearize_cache_indices, radix sort, run-length
// encode, one warp per run), so a row looked up many times is read and written once.
double distinct_rows(double rows, double lookups) {
  if (rows <= 1.0 || lookups <= 0.0) return std::min(rows, lookups);
  return rows * -std::expm1(lookups * std::log1p(-1.0 / rows));
}

struct Linear {
  int64_t in = 0, out = 0;
};

std::vector<Linear> mlp_layers(int64_t in, const std::vector<int64_t>& widths) {
  std::vector<Linear> l;
  for (int64_t w : widths) {
    l.push_back({in, w});
    in = w;
  }
  return l;
}

int64_t sum_dims(const DlrmConfig& d) {
  int64_t s = 0;
  for (const auto& t : d.tables) s += t.dim;
  return s;
}

}  // namespace

const char* to_string(TableSharding k) {
  switch (k) {
    case TableSharding::kDataParallel: return "data-parallel";
    case TableSharding::kTableWise: return "table-wise";
    case TableSharding::kColumnWise: return "column-wise";
    case TableSharding::kRowWise: return "row-wise";
  }
  return "?";
}

std::string describe(const DlrmShardingPlan& plan) {
  std::string s;
  for (size_t i = 0; i < plan.tables.size(); ++i) {
    const TablePlacement& p = plan.tables[i];
    if (!s.empty()) s += ' ';
    s += 't';
    s += std::to_string(i);
    s += ':';
    switch (p.kind) {
      case TableSharding::kDataParallel: s += "dp"; break;
      case TableSharding::kRowWise: s += "rw"; break;
      case TableSharding::kTableWise:
        s += "tw@";
        s += std::to_string(p.ranks.empty() ? -1 : p.ranks[0]);
        break;
      case TableSharding::kColumnWise:
        s += "cw";
        s += std::to_string(p.ranks.size());
        s += '@';
        for (size_t j = 0; j < p.ranks.size(); ++j) {
          if (j) s += ',';
          s += std::to_string(p.ranks[j]);
        }
        break;
    }
    if (p.uvm_caching) s += "+uvm";
  }
  return s;
}

Expected<DlrmShardingPlan> parse_dlrm_plan(const std::string& text) {
  DlrmShardingPlan plan;
  plan.name = "given";
  auto fail = [&](const std::string& word, const std::string& why) {
    return Expected<DlrmShardingPlan>::fail("", "\"" + word + "\": " + why);
  };
  // Non-negative integer of a whole string, or -1.
  auto number = [](const std::string& s) -> int64_t {
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) return -1;
    return std::stoll(s);
  };
  size_t pos = 0;
  while (pos < text.size()) {
    if (text[pos] == ' ') {
      ++pos;
      continue;
    }
    const size_t end = std::min(text.find(' ', pos), text.size());
    const std::string word = text.substr(pos, end - pos);
    pos = end;
    const size_t colon = word.find(':');
    std::string expected = "t";  // "t3"; appended, as operator+ trips GCC 12's -Wrestrict false positive
    expected += std::to_string(plan.tables.size());
    if (colon == std::string::npos || word.substr(0, colon) != expected)
      return fail(word, "expected " + expected + ":KIND (tables in order; KIND dp, rw, tw@RANK or cwK@R1,R2,.., +uvm for host memory)");
    std::string kind = word.substr(colon + 1);
    TablePlacement p;
    if (kind.size() > 4 && kind.compare(kind.size() - 4, 4, "+uvm") == 0) {
      p.uvm_caching = true;
      kind.resize(kind.size() - 4);
    }
    if (kind == "dp") {
      if (p.uvm_caching) return fail(word, "a data-parallel table is in every GPU's HBM (+uvm is for rw, tw and cw)");
      p.kind = TableSharding::kDataParallel;
    } else if (kind == "rw") {
      p.kind = TableSharding::kRowWise;
    } else if (kind.rfind("tw@", 0) == 0) {
      p.kind = TableSharding::kTableWise;
      const int64_t r = number(kind.substr(3));
      if (r < 0) return fail(word, "tw@ needs a rank number");
      p.ranks = {static_cast<int32_t>(r)};
    } else if (kind.rfind("cw", 0) == 0 && kind.find('@') != std::string::npos) {
      p.kind = TableSharding::kColumnWise;
      const size_t at = kind.find('@');
      const int64_t k = number(kind.substr(2, at - 2));
      std::string list = kind.substr(at + 1) + ",";
      for (size_t a = 0, b = list.find(','); b != std::string::npos; a = b + 1, b = list.find(',', a)) {
        const int64_t r = number(list.substr(a, b - a));
        if (r < 0) return fail(word, "cwK@ needs comma-separated rank numbers");
        p.ranks.push_back(static_cast<int32_t>(r));
      }
      if (k != static_cast<int64_t>(p.ranks.size())) return fail(word, "cwK@ needs K ranks");
    } else {
      return fail(word, "unknown kind (dp, rw, tw@RANK or cwK@R1,R2,..)");
    }
    plan.tables.push_back(std::move(p));
  }
  if (plan.tables.empty()) return fail(text, "no tables");
  return plan;
}

Plan dlrm_plan(const Scenario& sc, const DlrmShardingPlan& sharding) {
  Plan p;
  p.dp = std::max<int64_t>(1, sc.cluster.num_gpus);
  p.micro_batch_size = std::max<int64_t>(1, sc.training.global_batch_size / p.dp);
  p.embedding_sharding = describe(sharding);
  return p;
}

DlrmDenseShape dlrm_dense_shape(const DlrmConfig& d) {
  DlrmDenseShape s;
  for (const Linear& l : mlp_layers(d.dense_features, d.bottom_mlp)) s.bottom_params += l.in * l.out + l.out;
  const int64_t bottom_out = d.bottom_mlp.empty() ? d.dense_features : d.bottom_mlp.back();
  if (d.interaction == "dcn") {
    // DCN v2 low-rank cross layer (Wang et al. 2021; TorchRec LowRankCrossNet):
    // x_{l+1} = x0 * (U_l (V_l^T x_l) + b_l) + x_l, U_l, V_l: D0 x rank, b_l: D0.
    const int64_t d0 = bottom_out + sum_dims(d);
    s.interaction_params = d.dcn_layers * (2 * d0 * d.dcn_rank + d0);
    s.interaction_out = d0;
  } else {
    // Dot interaction (Naumov et al. 2019): the bottom output concatenated with the pairwise
    // dot products of the F = tables + 1 vectors, without self-products.
    const int64_t f = static_cast<int64_t>(d.tables.size()) + 1;
    s.interaction_out = bottom_out + f * (f - 1) / 2;
  }
  for (const Linear& l : mlp_layers(s.interaction_out, d.top_mlp)) s.top_params += l.in * l.out + l.out;
  return s;
}

double dlrm_lookup_forward_s(const Scenario& sc, const DlrmRankLoad& l) {
  const GpuSpec& gpu = sc.cluster.gpu;
  return l.lookup_forward_bytes / (gpu.memory_bandwidth_GBps * 1e9 * kEmbeddingGatherEfficiency) +
         l.host_forward_bytes / host_link_bytes_per_s(gpu);
}

double dlrm_lookup_backward_s(const Scenario& sc, const DlrmRankLoad& l) {
  const GpuSpec& gpu = sc.cluster.gpu;
  return l.lookup_backward_bytes / (gpu.memory_bandwidth_GBps * 1e9 * kEmbeddingGatherEfficiency) +
         l.host_backward_bytes / host_link_bytes_per_s(gpu);
}

double dlrm_embedding_bytes_per_element(const Scenario& sc) { return bytes_per_element(sc.training.precision); }

double dlrm_table_bytes_per_element(const Scenario& sc) {
  return bytes_per_element(sc.model.dlrm.embedding_dtype.value_or(sc.training.precision));
}

double dlrm_optimizer_bytes_per_row(const Scenario& sc, int64_t dim) {
  const std::string& o = sc.model.dlrm.embedding_optimizer;
  if (o == "adam") return kAdamStateBytesPerElement * static_cast<double>(dim);
  if (o == "adagrad") return kAdagradStateBytesPerElement * static_cast<double>(dim);
  if (o == "sgd") return 0.0;
  return kRowwiseAdagradStateBytesPerRow;
}

std::string check_dlrm_plan(const Scenario& sc, const DlrmShardingPlan& plan) {
  const auto& tables = sc.model.dlrm.tables;
  const int64_t n = sc.cluster.num_gpus;
  if (plan.tables.size() != tables.size()) return "the plan places " + std::to_string(plan.tables.size()) +
                                                   " tables, the model has " + std::to_string(tables.size());
  for (size_t i = 0; i < tables.size(); ++i) {
    const TablePlacement& p = plan.tables[i];
    const std::string where = "table " + tables[i].name + ": ";
    for (int32_t r : p.ranks)
      if (r < 0 || r >= n) return where + "rank " + std::to_string(r) + " outside 0.." + std::to_string(n - 1);
    switch (p.kind) {
      case TableSharding::kDataParallel:
      case TableSharding::kRowWise:
        if (!p.ranks.empty()) return where + "data-parallel and row-wise tables use every GPU, ranks must be empty";
        if (p.uvm_caching && p.kind == TableSharding::kDataParallel) return where + "data-parallel tables are in HBM";
        break;
      case TableSharding::kTableWise:
        if (p.ranks.size() != 1) return where + "table-wise needs exactly one rank";
        break;
      case TableSharding::kColumnWise: {
        const int64_t k = static_cast<int64_t>(p.ranks.size());
        if (k < 2) return where + "column-wise needs at least two ranks";
        if (tables[i].dim % k != 0) return where + "dim not divisible by the column shards";
        if (std::set<int32_t>(p.ranks.begin(), p.ranks.end()).size() != p.ranks.size())
          return where + "column shards on the same GPU";
        break;
      }
    }
  }
  return "";
}

std::vector<DlrmRankLoad> dlrm_rank_loads(const Scenario& sc, const DlrmShardingPlan& plan) {
  assert(check_dlrm_plan(sc, plan).empty());
  const int64_t n = std::max<int64_t>(1, sc.cluster.num_gpus);
  const double e = dlrm_embedding_bytes_per_element(sc);  // pooled embeddings and their gradients
  const double e_row = dlrm_table_bytes_per_element(sc);  // table rows as stored
  const int64_t B = sc.training.global_batch_size;
  const double b = static_cast<double>(B) / static_cast<double>(n);
  std::vector<DlrmRankLoad> loads(n);
  const auto& tables = sc.model.dlrm.tables;
  for (size_t i = 0; i < tables.size(); ++i) {
    const EmbeddingTable& t = tables[i];
    const TablePlacement& p = plan.tables[i];
    const double p_f = t.pooling_factor;
    const double rows = static_cast<double>(t.rows);
    // TBE kernels on one shard of `shard_rows` rows of width `dim` that serves `lookups` ids
    // pooled into `samples` outputs. Forward: read each id and its row, write the pooled
    // output. Backward with the fused optimizer: read each id and its sample's pooled
    // gradient, then read and write every distinct row and its optimizer state once.
    auto forward_bytes = [&](double lookups, double samples, int64_t dim) {
      return lookups * (static_cast<double>(dim) * e_row + kSparseIdBytes) + samples * static_cast<double>(dim) * e;
    };
    auto backward_bytes = [&](double shard_rows, double lookups, int64_t dim) {
      const double opt = dlrm_optimizer_bytes_per_row(sc, dim);
      return lookups * (static_cast<double>(dim) * e + kSparseIdBytes) +
             distinct_rows(shard_rows, lookups) * 2.0 * (static_cast<double>(dim) * e_row + (p.uvm_caching ? 0.0 : opt));
    };
    // One shard's rows and state on its GPU: all in HBM, or (UVM caching) in host memory with
    // an HBM cache of kUvmCacheLoadFactor of the rows. Every distinct row of the batch is
    // prefetched into the cache before the forward; a miss reads it over the host link and
    // writes an evicted row back; the fused update reads and writes the state in host memory.
    const double hit_rate = sc.model.dlrm.uvm_cache_hit_rate >= 0 ? sc.model.dlrm.uvm_cache_hit_rate : kUvmCacheLoadFactor;
    auto hold = [&](DlrmRankLoad& l, double shard_rows, double lookups, int64_t dim) {
      const double row = static_cast<double>(dim) * e_row, opt = dlrm_optimizer_bytes_per_row(sc, dim);
      if (!p.uvm_caching) {
        l.table_weight_bytes += shard_rows * row;
        l.table_optimizer_bytes += shard_rows * opt;
        return;
      }
      const double distinct = distinct_rows(shard_rows, lookups);
      l.table_weight_bytes += std::ceil(kUvmCacheLoadFactor * shard_rows) * row;
      l.host_memory_bytes += shard_rows * (row + opt);
      l.host_forward_bytes += distinct * (1.0 - hit_rate) * 2.0 * row;
      l.host_backward_bytes += distinct * 2.0 * opt;
    };
    const double opt_row = dlrm_optimizer_bytes_per_row(sc, t.dim);
    switch (p.kind) {
      case TableSharding::kDataParallel:
        for (DlrmRankLoad& l : loads) {
          l.table_weight_bytes += rows * t.dim * e_row;
          l.table_optimizer_bytes += rows * opt_row;
          l.table_grad_bytes += rows * t.dim * e_row;
          l.lookup_forward_bytes += forward_bytes(b * p_f, b, t.dim);
          // Scatter the per-lookup gradients into the dense gradient, then a dense optimizer
          // pass over the whole table (read grad, read/write weights and state).
          l.lookup_backward_bytes += b * p_f * t.dim * e + rows * (3.0 * t.dim * e_row + 2.0 * opt_row);
        }
        break;
      case TableSharding::kTableWise:
      case TableSharding::kColumnWise: {
        const int64_t k = static_cast<int64_t>(p.ranks.size());
        const int64_t dim = t.dim / k;
        for (int32_t r : p.ranks) {
          DlrmRankLoad& l = loads[r];
          hold(l, rows, B * p_f, dim);
          l.lookup_forward_bytes += forward_bytes(B * p_f, B, dim);
          l.lookup_backward_bytes += backward_bytes(rows, B * p_f, dim);
          l.a2a_send_bytes += B * dim * static_cast<int64_t>(e);
        }
        for (DlrmRankLoad& l : loads) {
          l.id_send_bytes += k * static_cast<int64_t>(std::llround(b * p_f)) * kSparseIdBytes;
          l.a2a_backward_send_bytes += b * t.dim * static_cast<int64_t>(e);  // k shards of dim / k
        }
        for (int32_t r : p.ranks) loads[r].id_receive_bytes += n * static_cast<int64_t>(std::llround(b * p_f)) * kSparseIdBytes;
        break;
      }
      case TableSharding::kRowWise: {
        const double shard_rows = static_cast<double>(ceil_div(t.rows, n));
        for (DlrmRankLoad& l : loads) {
          // Uniform ids: each GPU sees 1/n of the global batch's lookups.
          const double lookups = B * p_f / static_cast<double>(n);
          hold(l, shard_rows, lookups, t.dim);
          l.lookup_forward_bytes += forward_bytes(lookups, B, t.dim);
          l.lookup_backward_bytes += backward_bytes(shard_rows, lookups, t.dim);
          l.rw_reduce_scatter_bytes += B * t.dim * static_cast<int64_t>(e);
          l.id_send_bytes += static_cast<int64_t>(std::llround(b * p_f)) * kSparseIdBytes;
          l.id_receive_bytes += static_cast<int64_t>(std::llround(b * p_f)) * kSparseIdBytes;  // 1/n from each GPU
        }
        break;
      }
    }
  }
  return loads;
}

DlrmDenseCosts dlrm_dense_costs(const Scenario& sc) {
  const DlrmConfig& d = sc.model.dlrm;
  const GpuSpec& gpu = sc.cluster.gpu;
  const Precision prec = sc.training.precision;
  const int64_t n = std::max<int64_t>(1, sc.cluster.num_gpus);
  const int64_t b = std::max<int64_t>(1, sc.training.global_batch_size / n);
  const double e = bytes_per_element(prec);
  const DlrmDenseShape shape = dlrm_dense_shape(d);
  DlrmDenseCosts c;
  // ---- dense compute on one GPU (b samples), roofline per GEMM; `part` is 0 bottom MLP,
  // 1 interaction, 2 top MLP.
  double act_bytes = 0;
  auto gemm = [&](int part, int64_t m, int64_t k, int64_t nn) {
    const double flops = 2.0 * m * k * nn;
    const double mem = (static_cast<double>(k) * nn + static_cast<double>(m) * k + static_cast<double>(m) * nn) * e;
    c.fwd_s[part] += compute_time_s(gpu, prec, flops, mem, m, nn, k);
    c.bwd_s[part] += compute_time_s(gpu, prec, flops, mem, m, k, nn) + compute_time_s(gpu, prec, flops, mem, k, nn, m);
    c.fwd_flops[part] += flops;
  };
  int part = 0;
  for (const auto& layers : {mlp_layers(d.dense_features, d.bottom_mlp), mlp_layers(shape.interaction_out, d.top_mlp)}) {
    for (const Linear& l : layers) {
      gemm(part, b, l.in, l.out);
      act_bytes += static_cast<double>(b) * (l.in + l.out) * e;
    }
    part = 2;
  }
  const int64_t bottom_out = d.bottom_mlp.empty() ? d.dense_features : d.bottom_mlp.back();
  if (d.interaction == "dcn") {
    const int64_t d0 = shape.interaction_out;
    for (int64_t l = 0; l < d.dcn_layers; ++l) {
      gemm(1, b, d0, d.dcn_rank);
      gemm(1, b, d.dcn_rank, d0);
      // x0 * (.) + b + x_l: elementwise, HBM bound.
      const double ew = 4.0 * b * d0 * e;
      c.fwd_s[1] += compute_time_s(gpu, prec, 3.0 * b * d0, ew, 0, 0, 0);
      c.bwd_s[1] += 2.0 * compute_time_s(gpu, prec, 3.0 * b * d0, ew, 0, 0, 0);
      act_bytes += static_cast<double>(b) * (2 * d0 + d.dcn_rank) * e;
    }
  } else {
    const int64_t f = static_cast<int64_t>(d.tables.size()) + 1;
    // Z = X X^T per sample, X the F vectors of width bottom_out: one batched GEMM of b
    // (F x dim) . (dim x F) products (TorchRec's DLRM InteractionArch: torch.bmm); backward
    // dX = (dZ + dZ^T) X, b (F x F) . (F x dim) products, counted as two.
    const double flops = 2.0 * b * f * f * bottom_out;
    const double mem = (2.0 * b * f * bottom_out + static_cast<double>(b) * f * f) * e;
    c.fwd_s[1] += batched_compute_time_s(gpu, prec, flops, mem, b, f, f, bottom_out);
    c.bwd_s[1] += 2.0 * batched_compute_time_s(gpu, prec, flops, mem, b, f, bottom_out, f);
    c.fwd_flops[1] += flops;
    act_bytes += static_cast<double>(b) * (f * bottom_out + f * f) * e;
  }
  c.activation_bytes = act_bytes;
  return c;
}

DlrmAllToAllMatrices dlrm_all_to_all_matrices(const Scenario& sc, const DlrmShardingPlan& plan) {
  assert(check_dlrm_plan(sc, plan).empty());
  const int64_t n = std::max<int64_t>(1, sc.cluster.num_gpus);
  const auto e = static_cast<int64_t>(dlrm_embedding_bytes_per_element(sc));
  const double b = static_cast<double>(sc.training.global_batch_size) / static_cast<double>(n);
  const auto nn = static_cast<size_t>(n);
  DlrmAllToAllMatrices m;
  m.pooled_forward.assign(nn, std::vector<int64_t>(nn, 0));
  m.pooled_backward = m.pooled_forward;
  m.ids = m.pooled_forward;
  const auto& tables = sc.model.dlrm.tables;
  for (size_t i = 0; i < tables.size(); ++i) {
    const EmbeddingTable& t = tables[i];
    const TablePlacement& p = plan.tables[i];
    const int64_t ids = static_cast<int64_t>(std::llround(b * t.pooling_factor)) * kSparseIdBytes;
    if (p.kind == TableSharding::kTableWise || p.kind == TableSharding::kColumnWise) {
      const int64_t dim = t.dim / static_cast<int64_t>(p.ranks.size());
      // b x dim per (owner, GPU) pair, as dlrm_rank_loads counts B x dim per owner.
      const int64_t piece = static_cast<int64_t>(b) * dim * e;
      for (int32_t o : p.ranks)
        for (size_t j = 0; j < nn; ++j) {
          m.pooled_forward[static_cast<size_t>(o)][j] += piece;
          m.pooled_backward[j][static_cast<size_t>(o)] += piece;
          m.ids[j][static_cast<size_t>(o)] += ids;
        }
    } else if (p.kind == TableSharding::kRowWise) {
      // Uniform ids: 1/n of a GPU's ids to every GPU (the remainder to the first ones).
      for (size_t j = 0; j < nn; ++j)
        for (size_t o = 0; o < nn; ++o)
          m.ids[j][o] += ids / n + (static_cast<int64_t>(o) < ids % n ? 1 : 0);
    }
  }
  return m;
}

DlrmCommSizes dlrm_comm_sizes(const Scenario& sc, const std::vector<DlrmRankLoad>& loads) {
  DlrmCommSizes z;
  double table_grad_bytes = 0;
  for (const DlrmRankLoad& l : loads) {
    z.pooled_a2a_bytes = std::max(z.pooled_a2a_bytes, l.a2a_send_bytes);
    // Backward: each GPU sends b x (all shards' dims); the owner receives what it sent forward.
    z.pooled_a2a_backward_bytes = std::max({z.pooled_a2a_backward_bytes, l.a2a_backward_send_bytes, l.a2a_send_bytes});
    z.id_a2a_bytes = std::max({z.id_a2a_bytes, l.id_send_bytes, l.id_receive_bytes});
    z.rw_bytes = std::max(z.rw_bytes, l.rw_reduce_scatter_bytes);
    table_grad_bytes = std::max(table_grad_bytes, l.table_grad_bytes);  // the same on every GPU
  }
  // Data-parallel gradients: dense MLPs (fp32 main grads when mixed, as model_math) and the
  // data-parallel tables' dense gradients.
  const StateBytesPerParameter st = state_bytes_per_parameter(sc.training.precision, sc.training.optimizer);
  const double dense_params = static_cast<double>(dlrm_dense_shape(sc.model.dlrm).dense_params());
  z.dp_grad_bytes = static_cast<int64_t>(dense_params * st.gradients + table_grad_bytes);
  return z;
}

StageMemory dlrm_rank_memory(const Scenario& sc, const DlrmRankLoad& L) {
  const DlrmConfig& d = sc.model.dlrm;
  const int64_t n = std::max<int64_t>(1, sc.cluster.num_gpus);
  const int64_t b = std::max<int64_t>(1, sc.training.global_batch_size / n);
  const double e = bytes_per_element(sc.training.precision);
  const StateBytesPerParameter st = state_bytes_per_parameter(sc.training.precision, sc.training.optimizer);
  const double dense_params = static_cast<double>(dlrm_dense_shape(d).dense_params());
  StageMemory m;
  m.stage = 0;
  m.weights_gib = (L.table_weight_bytes + dense_params * st.weights) / kBytesPerGib;
  m.gradients_gib = (L.table_grad_bytes + dense_params * st.gradients) / kBytesPerGib;
  m.optimizer_gib = (L.table_optimizer_bytes + dense_params * st.optimizer) / kBytesPerGib;
  // Pooled embeddings of the local batch (received) and the activations saved for backward.
  m.activations_gib = (dlrm_dense_costs(sc).activation_bytes + static_cast<double>(b) * sum_dims(d) * e) / kBytesPerGib;
  // Send buffer of the pooled all-to-all (and its gradient), row-wise partial sums, ids.
  m.buffers_gib = (2.0 * L.a2a_send_bytes + 2.0 * L.rw_reduce_scatter_bytes + 2.0 * L.id_send_bytes) / kBytesPerGib;
  m.total_gib = m.weights_gib + m.gradients_gib + m.optimizer_gib + m.activations_gib + m.buffers_gib;
  return m;
}

BackendResult estimate_dlrm(const Scenario& sc, const DlrmShardingPlan& plan) {
  const DlrmConfig& d = sc.model.dlrm;
  const ClusterConfig& c = sc.cluster;
  const GpuSpec& gpu = c.gpu;
  const Precision prec = sc.training.precision;
  const int64_t n = std::max<int64_t>(1, c.num_gpus);
  const int64_t B = sc.training.global_batch_size;
  const std::vector<DlrmRankLoad> loads = dlrm_rank_loads(sc, plan);
  const DlrmDenseShape shape = dlrm_dense_shape(d);

  BackendResult r;
  r.backend = "analytical";
  r.plan = dlrm_plan(sc, plan);

  const DlrmDenseCosts dense = dlrm_dense_costs(sc);
  const double dense_s = dense.forward_s() + dense.backward_s();
  const double fwd_flops = dense.forward_flops();

  // ---- busiest GPU: slowest lookups and largest send buffers (all-to-alls are synchronous).
  // The pooled all-to-all waits for every GPU's forward lookups and the next one for every
  // GPU's backward, so the slowest forward and the slowest backward add up.
  double lookup_fwd_s = 0, lookup_bwd_s = 0;
  size_t busiest = 0;
  double busiest_bytes = -1;
  for (size_t i = 0; i < loads.size(); ++i) {
    const DlrmRankLoad& l = loads[i];
    lookup_fwd_s = std::max(lookup_fwd_s, dlrm_lookup_forward_s(sc, l));
    lookup_bwd_s = std::max(lookup_bwd_s, dlrm_lookup_backward_s(sc, l));
    const double mem = dlrm_rank_memory(sc, l).total_gib;
    if (mem > busiest_bytes) {
      busiest_bytes = mem;
      busiest = i;
    }
  }
  const double lookup_s = lookup_fwd_s + lookup_bwd_s;
  const DlrmCommSizes sizes = dlrm_comm_sizes(sc, loads);
  const int64_t a2a_max = sizes.pooled_a2a_bytes, id_max = sizes.id_a2a_bytes, rs_max = sizes.rw_bytes;
  const GroupSpan world = strided_span(0, n, 1, c.gpus_per_node > 0 ? c.gpus_per_node : n);
  const double a2a_s = collective_time_s(CollectiveKind::kAllToAll, a2a_max, world, c);
  const double a2a_bwd_s = collective_time_s(CollectiveKind::kAllToAll, sizes.pooled_a2a_backward_bytes, world, c);
  const double id_s = collective_time_s(CollectiveKind::kAllToAll, id_max, world, c);
  const double rs_s = collective_time_s(CollectiveKind::kReduceScatter, rs_max, world, c);
  const double ag_s = collective_time_s(CollectiveKind::kAllGather, rs_max, world, c);

  // ---- data-parallel gradients: dense MLPs (fp32 main grads when mixed, as model_math) and
  // the data-parallel tables' dense gradients.
  const double dense_params = static_cast<double>(shape.dense_params());
  const int64_t dp_grad_bytes = sizes.dp_grad_bytes;
  const double ar_s = collective_time_s(CollectiveKind::kAllReduce, dp_grad_bytes, world, c);
  const double opt_s = optimizer_step_time_s(sc, dense_params, dense_params);

  // TorchRec's TrainPipelineSparseDist runs the next batch's input dist during this batch's
  // dense compute. It starts once the bottom MLP's forward is issued (as
  // strategies/dlrm_lowering.cc orders it); what it runs past the forward occupies the
  // network into the backward. (The owner of a heavily pooled table receives every sample's
  // ids of it: the busiest receiver, not the senders, sizes this exchange on many GPUs.)
  // The exchange holds NCCL's SMs while it runs (nccl_overlap_sm_share), so the dense compute
  // beside it ends later (compute_end_beside_s), as it does in the SimGrid backend.
  const double share = nccl_overlap_sm_share(gpu);
  const double fwd_window_s = dense.fwd_s[1] + dense.fwd_s[2];
  const double fwd_end_s = compute_end_beside_s(fwd_window_s, id_s, share);
  const double ids_past_forward_s = std::max(0.0, id_s - fwd_end_s);
  // The dense modules are wrapped in DistributedDataParallel, whose reducer all-reduces
  // gradient buckets as the backward fills them, the first bucket capped at 1 MiB (c10d
  // reducer kDefaultFirstBucketBytes), so the all-reduce starts with the backward. It crosses
  // the same NVLink and NIC ports as the embedding collectives, so the network carries them
  // one after the other: the input dist, the all-reduce (beside the dense backward), then the
  // gradients' all-to-all and all-gather, which the TBE backward waits for; without those the
  // TBE backward runs beside the all-reduce. The optimizer step waits for everything.
  // The dense backward runs beside that traffic and loses its SMs the same way.
  const double dense_bwd_s = dense.backward_s();
  const double emb_bwd_comm_s = a2a_bwd_s + ag_s;
  const double network_s = ids_past_forward_s + ar_s;
  const double bwd_end_s = compute_end_beside_s(dense_bwd_s, network_s, share);
  const double backward_phase_s =
      emb_bwd_comm_s > 0 ? std::max(bwd_end_s, network_s) + emb_bwd_comm_s + lookup_bwd_s
                         : std::max(std::max(bwd_end_s, ids_past_forward_s) + lookup_bwd_s, network_s);
  const double backward_exposed_s = backward_phase_s - (dense_bwd_s + emb_bwd_comm_s + lookup_bwd_s);
  TimeBreakdown& t = r.time_breakdown_s;
  t.compute = lookup_s + dense_s;
  t.ep_comm = a2a_s + a2a_bwd_s + id_s + rs_s + ag_s;
  t.dp_comm = ar_s;
  t.optimizer = opt_s;
  t.exposed_comm = a2a_s + rs_s + emb_bwd_comm_s + backward_exposed_s + (fwd_end_s - fwd_window_s);
  r.iteration_time_s = t.compute + t.optimizer + t.exposed_comm;

  // ---- figures; "tokens" are samples for a recommendation model.
  r.tokens_per_s = r.iteration_time_s > 0 ? B / r.iteration_time_s : 0;
  r.model_flops_per_iteration = 3.0 * fwd_flops * static_cast<double>(n);
  r.hardware_flops_per_iteration = r.model_flops_per_iteration;
  const double peak = peak_tflops(gpu, prec) * 1e12;
  if (r.iteration_time_s > 0) {
    r.model_tflops_per_gpu = r.model_flops_per_iteration / n / r.iteration_time_s / 1e12;
    r.hardware_tflops_per_gpu = r.model_tflops_per_gpu;
    r.mfu = peak > 0 ? r.model_tflops_per_gpu * 1e12 / peak : 0;
    r.hfu = r.mfu;
  }

  auto add = [&](CollectiveKind ck, GroupKind group, int64_t size, int64_t count, double s) {
    if (size <= 0 || n <= 1) return;
    r.communication.push_back({ck, group, static_cast<int64_t>(count * collective_wire_bytes(ck, size, n)), count, count * s, n});
  };
  add(CollectiveKind::kAllToAll, GroupKind::kWorld, id_max, 1, id_s);
  // Pooled embeddings forward and their gradients backward: one entry of two calls.
  if (a2a_max > 0 && n > 1)
    r.communication.push_back({CollectiveKind::kAllToAll, GroupKind::kWorld,
                               static_cast<int64_t>(collective_wire_bytes(CollectiveKind::kAllToAll, a2a_max, n) +
                                                    collective_wire_bytes(CollectiveKind::kAllToAll, sizes.pooled_a2a_backward_bytes, n)),
                               2, a2a_s + a2a_bwd_s, n});
  add(CollectiveKind::kReduceScatter, GroupKind::kWorld, rs_max, 1, rs_s);
  add(CollectiveKind::kAllGather, GroupKind::kWorld, rs_max, 1, ag_s);
  add(CollectiveKind::kAllReduce, GroupKind::kDp, dp_grad_bytes, 1, ar_s);

  // ---- memory of the busiest GPU (the highest total).
  StageMemory m = dlrm_rank_memory(sc, loads[busiest]);
  r.memory.stages.push_back(m);
  r.memory.peak_gib = m.total_gib;
  r.memory.capacity_gib = usable_memory_gib(gpu);
  r.memory.fits = m.total_gib <= r.memory.capacity_gib;
  return r;
}

}  // namespace monarch

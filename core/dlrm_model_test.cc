// DLRM cost and memory model: per-GPU loads of each sharding kind, dense shapes, the result.
#include "core/dlrm_model.h"

#include <gtest/gtest.h>

#include "core/presets.h"

namespace monarch {
namespace {

Scenario small_dlrm(int64_t gpus, int64_t batch = 1024) {
  Scenario s;
  s.model.architecture = Architecture::kDlrm;
  s.model.dlrm.tables = {{"a", 1000, 64, 1.0}, {"b", 4000, 64, 2.0}};
  s.model.dlrm.dense_features = 13;
  s.model.dlrm.bottom_mlp = {128, 64};
  s.model.dlrm.top_mlp = {256, 1};
  const GpuPreset* p = find_gpu_preset("H100-SXM");
  EXPECT_NE(p, nullptr);
  s.cluster.gpu = p->spec;
  s.cluster.num_gpus = gpus;
  s.cluster.gpus_per_node = 8;
  s.cluster.intra_node = p->default_intra_node;
  s.cluster.inter_node = p->default_inter_node;
  s.cluster.nics_per_node = 8;
  s.training.global_batch_size = batch;
  s.training.precision = Precision::kFp32;
  return s;
}

DlrmShardingPlan plan_of(std::vector<TablePlacement> t) {
  DlrmShardingPlan p;
  p.tables = std::move(t);
  return p;
}

TEST(DlrmModel, DotInteractionShape) {
  const DlrmDenseShape s = dlrm_dense_shape(small_dlrm(2).model.dlrm);
  // bottom: 13x128+128 + 128x64+64; F = 3 vectors -> 3 pairs; top in = 64 + 3.
  EXPECT_EQ(s.bottom_params, 13 * 128 + 128 + 128 * 64 + 64);
  EXPECT_EQ(s.interaction_out, 67);
  EXPECT_EQ(s.interaction_params, 0);
  EXPECT_EQ(s.top_params, 67 * 256 + 256 + 256 + 1);
}

TEST(DlrmModel, DcnV2LowRankShape) {
  DlrmConfig d = small_dlrm(2).model.dlrm;
  d.interaction = "dcn";
  d.dcn_rank = 16;
  d.dcn_layers = 3;
  const DlrmDenseShape s = dlrm_dense_shape(d);
  const int64_t d0 = 64 + 64 + 64;  // bottom output + both tables' dims
  EXPECT_EQ(s.interaction_out, d0);
  EXPECT_EQ(s.interaction_params, 3 * (2 * d0 * 16 + d0));
}

TEST(DlrmModel, TableWiseOwnerSendsTheGlobalBatchPooled) {
  Scenario s = small_dlrm(4);
  const auto loads = dlrm_rank_loads(s, plan_of({{TableSharding::kTableWise, {2}}, {TableSharding::kTableWise, {3}}}));
  ASSERT_EQ(loads.size(), 4u);
  EXPECT_EQ(loads[0].a2a_send_bytes, 0);
  EXPECT_EQ(loads[2].a2a_send_bytes, 1024 * 64 * 4);
  EXPECT_EQ(loads[3].a2a_send_bytes, 1024 * 64 * 4);
  EXPECT_DOUBLE_EQ(loads[2].table_weight_bytes, 1000.0 * 64 * 4);
  EXPECT_DOUBLE_EQ(loads[3].table_optimizer_bytes, 4000.0 * 4);  // row-wise adagrad: 1 fp32 per row
  // ids: every GPU sends its 256 samples' ids of both tables (pooling 1 and 2).
  EXPECT_EQ(loads[0].id_send_bytes, (256 + 512) * 8);
}

TEST(DlrmModel, ColumnWiseSplitsTheDim) {
  Scenario s = small_dlrm(4);
  const auto loads = dlrm_rank_loads(s, plan_of({{TableSharding::kColumnWise, {0, 1}}, {TableSharding::kDataParallel, {}}}));
  EXPECT_EQ(loads[0].a2a_send_bytes, 1024 * 32 * 4);
  EXPECT_EQ(loads[1].a2a_send_bytes, 1024 * 32 * 4);
  EXPECT_EQ(loads[2].a2a_send_bytes, 0);
  EXPECT_DOUBLE_EQ(loads[2].table_grad_bytes, 4000.0 * 64 * 4);  // dp table: dense gradient everywhere
}

TEST(DlrmModel, RowWiseSplitsRowsAndReduceScatters) {
  Scenario s = small_dlrm(4);
  const auto loads = dlrm_rank_loads(s, plan_of({{TableSharding::kRowWise, {}}, {TableSharding::kRowWise, {}}}));
  for (const auto& l : loads) {
    EXPECT_DOUBLE_EQ(l.table_weight_bytes, (250.0 + 1000.0) * 64 * 4);
    EXPECT_EQ(l.rw_reduce_scatter_bytes, 2 * 1024 * 64 * 4);
    EXPECT_EQ(l.a2a_send_bytes, 0);
  }
}

TEST(DlrmModel, AdamKeepsTwoMomentsPerElement) {
  Scenario s = small_dlrm(2);
  s.model.dlrm.embedding_optimizer = "adam";
  EXPECT_DOUBLE_EQ(dlrm_optimizer_bytes_per_row(s, 64), 64.0 * 8);
}

// FBGEMM's fused TBE optimizers: SGD keeps no state, Adagrad one fp32 per element, row-wise
// Adagrad one fp32 per row; the state is read and written with every updated row.
TEST(DlrmModel, SgdAndAdagradEmbeddingOptimizers) {
  Scenario s = small_dlrm(2);
  s.model.dlrm.embedding_optimizer = "sgd";
  EXPECT_DOUBLE_EQ(dlrm_optimizer_bytes_per_row(s, 64), 0.0);
  const auto plan = plan_of({{TableSharding::kTableWise, {0}}, {TableSharding::kTableWise, {1}}});
  const double sgd_bwd = dlrm_rank_loads(s, plan)[0].lookup_backward_bytes;
  EXPECT_DOUBLE_EQ(dlrm_rank_loads(s, plan)[0].table_optimizer_bytes, 0.0);
  s.model.dlrm.embedding_optimizer = "adagrad";
  EXPECT_DOUBLE_EQ(dlrm_optimizer_bytes_per_row(s, 64), 64.0 * 4);
  EXPECT_DOUBLE_EQ(dlrm_rank_loads(s, plan)[0].table_optimizer_bytes, 1000.0 * 64 * 4);
  EXPECT_GT(dlrm_rank_loads(s, plan)[0].lookup_backward_bytes, sgd_bwd);
  s.model.dlrm.embedding_optimizer = "rowwise-adagrad";
  EXPECT_DOUBLE_EQ(dlrm_rank_loads(s, plan)[0].table_optimizer_bytes, 1000.0 * 4);
}

// Tables stored in fp32 under fp16 training (DeepLearningExamples' DLRM with AMP): rows, their
// lookups and the table memory take 4 bytes per element, the pooled vectors sent in the
// all-to-all stay in fp16.
TEST(DlrmModel, EmbeddingDtypeSetsTheRowsNotThePooledVectors) {
  Scenario s = small_dlrm(4);
  s.training.precision = Precision::kFp16;
  const auto plan = plan_of({{TableSharding::kTableWise, {2}}, {TableSharding::kTableWise, {3}}});
  const DlrmRankLoad half = dlrm_rank_loads(s, plan)[2];
  EXPECT_DOUBLE_EQ(half.table_weight_bytes, 1000.0 * 64 * 2);
  s.model.dlrm.embedding_dtype = Precision::kFp32;
  EXPECT_DOUBLE_EQ(dlrm_table_bytes_per_element(s), 4.0);
  EXPECT_DOUBLE_EQ(dlrm_embedding_bytes_per_element(s), 2.0);
  const DlrmRankLoad full = dlrm_rank_loads(s, plan)[2];
  EXPECT_DOUBLE_EQ(full.table_weight_bytes, 1000.0 * 64 * 4);
  EXPECT_EQ(full.a2a_send_bytes, half.a2a_send_bytes);
  EXPECT_EQ(full.a2a_send_bytes, 1024 * 64 * 2);
  // Forward: each of the 1024 lookups reads a 64-wide row, 2 more bytes per element.
  EXPECT_DOUBLE_EQ(full.lookup_forward_bytes - half.lookup_forward_bytes, 1024.0 * 64 * 2);
  EXPECT_GT(full.lookup_backward_bytes, half.lookup_backward_bytes);
}

// The TBE backward updates each distinct row once: a table of 3 rows looked up by 65536
// samples costs 3 row updates, a table far larger than the batch about one per lookup.
TEST(DlrmModel, BackwardUpdatesEachDistinctRowOnce) {
  Scenario s = small_dlrm(1, 65536);
  s.training.optimizer = Optimizer::kSgd;
  s.model.dlrm.embedding_optimizer = "sgd";
  s.model.dlrm.tables = {{"tiny", 3, 64, 1.0}, {"huge", 100'000'000, 64, 1.0}};
  const auto loads = [&](size_t t) {
    Scenario one = s;
    one.model.dlrm.tables = {s.model.dlrm.tables[t]};
    return dlrm_rank_loads(one, plan_of({{TableSharding::kTableWise, {0}}}))[0].lookup_backward_bytes;
  };
  const double per_lookup = 64 * 4.0 + kSparseIdBytes;  // the pooled gradient and the id
  const double row_update = 2.0 * 64 * 4.0;           // read and write the row (SGD)
  EXPECT_NEAR(loads(0), 65536 * per_lookup + 3 * row_update, 1.0);
  EXPECT_NEAR(loads(1), 65536 * (per_lookup + row_update), 65536 * row_update * 1e-3);
}

// The dot interaction is one batched GEMM of b tiny (F x dim) . (dim x F) products, not one
// product on one SM: its time grows with the batch about linearly, and stays far below
// a 64k batch's top MLP.
TEST(DlrmModel, DotInteractionIsABatchedGemm) {
  Scenario s = small_dlrm(1, 65536);
  s.training.precision = Precision::kBf16;
  s.model.dlrm.tables.assign(26, {"t", 1000, 64, 1.0});
  s.model.dlrm.bottom_mlp = {512, 64};
  s.model.dlrm.top_mlp = {1024, 1024, 1};
  const DlrmDenseCosts big = dlrm_dense_costs(s);
  s.training.global_batch_size = 8192;
  const DlrmDenseCosts small = dlrm_dense_costs(s);
  EXPECT_GT(big.fwd_s[1], 4.0 * small.fwd_s[1]);
  EXPECT_LT(big.fwd_s[1], 12.0 * small.fwd_s[1]);
  EXPECT_LT(big.fwd_s[1], big.fwd_s[2]);
  // 2 x 65536 x 27 x 27 x 64 FLOPs at most a few hundred microseconds on an H100.
  EXPECT_LT(big.fwd_s[1], 300e-6);
}

// DDP all-reduces the dense gradients beside the backward: exposed is only what exceeds it.
TEST(DlrmModel, AllReduceOverlapsTheBackward) {
  Scenario s = small_dlrm(16, 65536);
  const auto plan = plan_of({{TableSharding::kTableWise, {0}}, {TableSharding::kTableWise, {1}}});
  const BackendResult r = estimate_dlrm(s, plan);
  const TimeBreakdown& t = r.time_breakdown_s;
  EXPECT_GT(t.dp_comm, 0);
  // The small MLPs' all-reduce hides entirely behind the 65536-sample backward.
  EXPECT_LE(t.exposed_comm, t.ep_comm + 1e-12);
}

TEST(DlrmModel, CheckRejectsMalformedPlans) {
  Scenario s = small_dlrm(4);
  EXPECT_NE(check_dlrm_plan(s, plan_of({{TableSharding::kTableWise, {4}}, {TableSharding::kDataParallel, {}}})), "");
  EXPECT_NE(check_dlrm_plan(s, plan_of({{TableSharding::kColumnWise, {0, 0}}, {TableSharding::kDataParallel, {}}})), "");
  EXPECT_NE(check_dlrm_plan(s, plan_of({{TableSharding::kDataParallel, {}}})), "");
  EXPECT_EQ(check_dlrm_plan(s, plan_of({{TableSharding::kColumnWise, {0, 3}}, {TableSharding::kRowWise, {}}})), "");
  EXPECT_NE(check_dlrm_plan(s, plan_of({{TableSharding::kColumnWise, {0, 1, 2}}, {TableSharding::kRowWise, {}}})), "");  // 64 % 3
}

TEST(DlrmModel, ResultHasAllToAllsAllReduceAndBusiestGpuMemory) {
  Scenario s = small_dlrm(8);
  const BackendResult r = estimate_dlrm(s, plan_of({{TableSharding::kTableWise, {1}}, {TableSharding::kRowWise, {}}}));
  EXPECT_EQ(r.plan.dp, 8);
  EXPECT_EQ(r.plan.micro_batch_size, 128);
  EXPECT_GT(r.iteration_time_s, 0);
  EXPECT_NEAR(r.iteration_time_s, r.time_breakdown_s.compute + r.time_breakdown_s.optimizer + r.time_breakdown_s.exposed_comm, 1e-12);
  ASSERT_EQ(r.memory.stages.size(), 1u);
  // Busiest GPU holds table a whole plus its row-wise shard of b.
  EXPECT_GE(r.memory.stages[0].weights_gib * 1073741824.0, (1000.0 + 500.0) * 64 * 4);
  EXPECT_TRUE(r.memory.fits);
  bool a2a = false, ar = false, rs = false;
  for (const auto& c : r.communication) {
    if (c.kind == CollectiveKind::kAllToAll && c.count == 2) {
      a2a = true;
      // Forward: the owner sends B x dim (keeping its own 1/8); backward: every GPU sends its
      // b = B / 8 samples' gradients of the one table-wise table to the owner, which so
      // receives B x dim: the busiest port sizes both exchanges.
      EXPECT_EQ(c.bytes, 2 * (1024 * 64 * 4 * 7 / 8));
    }
    ar |= c.kind == CollectiveKind::kAllReduce && c.group == GroupKind::kDp;
    rs |= c.kind == CollectiveKind::kReduceScatter;
  }
  EXPECT_TRUE(a2a);
  EXPECT_TRUE(ar);
  EXPECT_TRUE(rs);
  EXPECT_GT(r.time_breakdown_s.ep_comm, 0);
  EXPECT_GT(r.time_breakdown_s.dp_comm, 0);
}

TEST(DlrmModel, AllToAllAcrossNodesCostsMoreThanInsideOne) {
  const auto plan = plan_of({{TableSharding::kTableWise, {0}}, {TableSharding::kTableWise, {1}}});
  Scenario in = small_dlrm(8, 65536), across = small_dlrm(16, 65536);
  auto a2a_s = [](const BackendResult& r) {
    for (const auto& c : r.communication)
      if (c.kind == CollectiveKind::kAllToAll && c.count == 2) return c.time_s;
    return 0.0;
  };
  EXPECT_GT(a2a_s(estimate_dlrm(across, plan)), a2a_s(estimate_dlrm(in, plan)));
}

TEST(DlrmModel, HugeTableDoesNotFitOnOneGpu) {
  Scenario s = small_dlrm(8);
  s.model.dlrm.tables[0].rows = 1'000'000'000;  // 1e9 x 64 x 4 B = 238 GiB
  const BackendResult r = estimate_dlrm(s, plan_of({{TableSharding::kTableWise, {0}}, {TableSharding::kDataParallel, {}}}));
  EXPECT_FALSE(r.memory.fits);
  EXPECT_GT(r.memory.peak_gib, 238.0);
  const BackendResult rw = estimate_dlrm(s, plan_of({{TableSharding::kRowWise, {}}, {TableSharding::kDataParallel, {}}}));
  EXPECT_TRUE(rw.memory.fits);
}

}  // namespace
}  // namespace monarch

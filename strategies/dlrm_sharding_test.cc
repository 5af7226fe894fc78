// Embedding sharding search: where tables go, that plans fit, and why impossible ones fail.
#include "strategies/dlrm_sharding.h"

#include <gtest/gtest.h>

#include "core/presets.h"
#include "core/scenario_io.h"

#include <iostream>

namespace monarch {
namespace {

Scenario dlrm(std::vector<EmbeddingTable> tables, int64_t gpus, int64_t batch = 4096) {
  Scenario s;
  s.model.architecture = Architecture::kDlrm;
  s.model.dlrm.tables = std::move(tables);
  s.model.dlrm.dense_features = 13;
  s.model.dlrm.bottom_mlp = {256, 128};
  s.model.dlrm.top_mlp = {512, 256, 1};
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

TEST(DlrmSharding, SmallTablesGoDataParallelOrTableWise) {
  const DlrmSearchResult r = search_dlrm_sharding(dlrm({{"s0", 100, 128, 1}, {"s1", 500, 128, 1}, {"s2", 2000, 128, 3}}, 8));
  ASSERT_TRUE(r.any_fits()) << r.no_fit_message;
  bool greedy_seen = false;
  for (const auto& p : r.ranked) {
    EXPECT_TRUE(p.result.memory.fits);
    if (p.sharding.name != "greedy") continue;
    greedy_seen = true;
    for (const TablePlacement& t : p.sharding.tables)
      EXPECT_TRUE(t.kind == TableSharding::kDataParallel || t.kind == TableSharding::kTableWise) << describe(p.sharding);
  }
  EXPECT_TRUE(greedy_seen);
  for (size_t i = 1; i < r.ranked.size(); ++i)
    EXPECT_LE(r.ranked[i - 1].result.iteration_time_s, r.ranked[i].result.iteration_time_s);
}

// A sharding the scenario gives (parallelism.embedding_sharding) is the one plan the search
// returns, priced as estimate_dlrm prices it; one that does not fit is named, not replaced.
TEST(DlrmSharding, AGivenShardingIsTheOnePlan) {
  Scenario s = dlrm({{"s0", 100, 128, 1}, {"s1", 500, 128, 1}, {"s2", 2000, 128, 3}}, 8);
  s.parallelism.embedding_sharding = "t0:tw@1 t1:tw@2 t2:tw@1";
  const DlrmSearchResult r = search_dlrm_sharding(s);
  ASSERT_EQ(r.ranked.size(), 1u) << r.no_fit_message;
  EXPECT_EQ(describe(r.ranked[0].sharding), "t0:tw@1 t1:tw@2 t2:tw@1");
  EXPECT_EQ(r.ranked[0].result.iteration_time_s, estimate_dlrm(s, r.ranked[0].sharding).iteration_time_s);
  // Every table on GPU 1 is slower than the searched best: the given plan is not a search hint.
  s.parallelism.embedding_sharding.reset();
  const double best_s = search_dlrm_sharding(s).ranked.front().result.iteration_time_s;
  EXPECT_LT(best_s, r.ranked[0].result.iteration_time_s);
  // 3 x 400M rows x 128 x 4 B = 572 GiB on one H100.
  Scenario big = dlrm({{"a", 400'000'000, 128, 1}, {"b", 400'000'000, 128, 1}, {"c", 400'000'000, 128, 1}}, 8);
  big.parallelism.embedding_sharding = "t0:tw@0 t1:tw@0 t2:tw@0";
  const DlrmSearchResult none = search_dlrm_sharding(big);
  EXPECT_FALSE(none.any_fits());
  EXPECT_NE(none.no_fit_message.find("the given sharding"), std::string::npos) << none.no_fit_message;
}

TEST(DlrmSharding, TableLargerThanOneGpuIsRowWise) {
  // 800M x 128 x 4 B = 381 GiB: more than one H100, and more than the 4 column shards of
  // width 32 hold (95 GiB each); fits as 16 row-wise shards of 24 GiB.
  const DlrmSearchResult r =
      search_dlrm_sharding(dlrm({{"huge", 800'000'000, 128, 1}, {"small", 1000, 128, 1}}, 16));
  ASSERT_TRUE(r.any_fits()) << r.no_fit_message;
  // In HBM only row-wise holds it; column-wise it needs host memory with an HBM cache (UVM
  // caching, 19 GiB per shard; at 4096 one-hot samples the misses cost microseconds).
  bool row_wise_in_hbm = false;
  for (const auto& p : r.ranked) {
    const TablePlacement& huge = p.sharding.tables[0];
    EXPECT_TRUE(huge.kind == TableSharding::kRowWise || huge.uvm_caching) << describe(p.sharding);
    row_wise_in_hbm |= huge.kind == TableSharding::kRowWise && !huge.uvm_caching;
  }
  EXPECT_TRUE(row_wise_in_hbm);
  // The uniform table-wise (a 76 GiB cache) and data-parallel plans are rejected, with the
  // table named.
  int named = 0;
  for (const auto& rej : r.rejected)
    if ((rej.reason.rfind("all-table-wise", 0) == 0 || rej.reason.rfind("all-data-parallel", 0) == 0) &&
        rej.reason.find("table huge") != std::string::npos)
      ++named;
  EXPECT_EQ(named, 2);
}

TEST(DlrmSharding, BalancesTableWiseLoadOverGpus) {
  std::vector<EmbeddingTable> t;
  for (int i = 0; i < 8; ++i) t.push_back({"t" + std::to_string(i), 2'000'000, 128, 20});
  const DlrmSearchResult r = search_dlrm_sharding(dlrm(t, 8, 65536));
  ASSERT_TRUE(r.any_fits());
  for (const auto& p : r.ranked) {
    if (p.sharding.name != "all-table-wise") continue;
    std::vector<int> per_gpu(8, 0);
    for (const auto& tp : p.sharding.tables) ++per_gpu.at(tp.ranks.at(0));
    for (int c : per_gpu) EXPECT_EQ(c, 1) << describe(p.sharding);
  }
}

// A table too large for every GPU's HBM, even row-wise, goes to host memory with an HBM cache
// (UVM caching) instead of the model being refused; the host link makes it slower.
TEST(DlrmSharding, TableLargerThanAllHbmGoesToHostMemoryWithACache) {
  // 1.5e9 x 128 x 4 B = 715 GiB: 89 GiB per row-wise shard on 8 H100s; a 20 % cache fits.
  const Scenario s = dlrm({{"big", 1'500'000'000, 128, 1}, {"small", 1000, 128, 1}}, 8, 65536);
  const DlrmSearchResult r = search_dlrm_sharding(s);
  ASSERT_TRUE(r.any_fits()) << r.no_fit_message;
  const DlrmRankedPlan& best = r.ranked.front();
  EXPECT_TRUE(best.sharding.tables[0].uvm_caching) << describe(best.sharding);
  EXPECT_FALSE(best.sharding.tables[1].uvm_caching) << describe(best.sharding);
  EXPECT_TRUE(best.result.memory.fits);
  const Expected<DlrmShardingPlan> back = parse_dlrm_plan(describe(best.sharding));
  ASSERT_TRUE(back.ok()) << back.problems().front().to_string();
  EXPECT_EQ(describe(*back), describe(best.sharding));
  // The same placement in HBM, on GPUs with room for it, is faster.
  Scenario roomy = s;
  roomy.cluster.gpu.memory_gib = 1000;
  DlrmShardingPlan in_hbm = best.sharding;
  in_hbm.tables[0].uvm_caching = false;
  EXPECT_GT(best.result.iteration_time_s, estimate_dlrm(roomy, in_hbm).iteration_time_s);
  // A data-parallel table cannot live in host memory.
  const Expected<DlrmShardingPlan> dp_in_host = parse_dlrm_plan("t0:dp+uvm t1:dp");
  ASSERT_FALSE(dp_in_host.ok());
  EXPECT_NE(dp_in_host.problems().front().message.find("data-parallel"), std::string::npos)
      << dp_in_host.problems().front().to_string();
}

TEST(DlrmSharding, ImpossibleModelIsRejectedWithItsReason) {
  // 2e10 x 128 x 4 B = 9.3 TiB: more than 8 H100s hold even row-wise.
  const DlrmSearchResult r = search_dlrm_sharding(dlrm({{"giant", 20'000'000'000, 128, 1}}, 8));
  EXPECT_FALSE(r.any_fits());
  EXPECT_NE(r.no_fit_message.find("table giant"), std::string::npos) << r.no_fit_message;
  EXPECT_NE(r.no_fit_message.find("GiB"), std::string::npos);
  EXPECT_FALSE(r.rejected.empty());
  for (const auto& rej : r.rejected) EXPECT_FALSE(rej.reason.empty());
}

TEST(DlrmSharding, BatchNotDivisibleByGpusIsRejected) {
  const DlrmSearchResult r = search_dlrm_sharding(dlrm({{"s", 100, 128, 1}}, 8, 4097));
  EXPECT_FALSE(r.any_fits());
  EXPECT_NE(r.no_fit_message.find("global_batch_size"), std::string::npos);
}

TEST(DlrmSharding, MixedPlanIsNoSlowerThanEveryUniformPlan) {
  std::vector<EmbeddingTable> t = {{"big", 60'000'000, 128, 1}, {"mid", 5'000'000, 128, 10}, {"s1", 1000, 128, 1},
                                   {"s2", 50'000, 128, 5}};
  const DlrmSearchResult r = search_dlrm_sharding(dlrm(t, 8, 65536));
  ASSERT_TRUE(r.any_fits());
  double greedy = -1;
  for (const auto& p : r.ranked)
    if (p.sharding.name == "greedy") greedy = p.result.iteration_time_s;
  ASSERT_GT(greedy, 0);
  // The greedy plan is ranked first or within 10% of the best uniform plan (it optimises the
  // embedding side only; the full estimate adds the dense part and overlaps).
  EXPECT_LE(greedy, 1.1 * r.ranked.front().result.iteration_time_s);
}

TEST(DlrmSharding, ShippedMlperfDcnV2FitsOn8And64H100) {
  double time_8 = 0;
  for (const char* f : {"dlrm-dcnv2-8-h100.json", "dlrm-dcnv2-64-h100.json"}) {
    auto sc = read_scenario_file(std::string(MONARCH_SOURCE_DIR) + "/scenarios/" + f);
    ASSERT_TRUE(sc.ok()) << f;
    const DlrmSearchResult r = search_dlrm_sharding(*sc);
    ASSERT_TRUE(r.any_fits()) << f << ": " << r.no_fit_message;
    const DlrmRankedPlan& best = r.ranked.front();
    std::cout << f << ": best " << best.sharding.name << " " << best.result.iteration_time_s * 1e3 << " ms, "
              << best.result.tokens_per_s << " samples/s, peak " << best.result.memory.peak_gib << " GiB\n  "
              << describe(best.sharding) << "\n";
    for (const auto& rej : r.rejected) std::cout << "  rejected: " << rej.reason << "\n";
    // The 40M-row tables (19 GiB each in bf16) are never replicated on every GPU.
    for (size_t t = 0; t < sc->model.dlrm.tables.size(); ++t)
      if (sc->model.dlrm.tables[t].rows == 40'000'000)
        EXPECT_NE(best.sharding.tables[t].kind, TableSharding::kDataParallel) << f;
    EXPECT_TRUE(best.result.memory.fits);
    if (sc->cluster.num_gpus == 8) time_8 = best.result.iteration_time_s;
    else EXPECT_LT(best.result.iteration_time_s, time_8);  // 64 GPUs share the same global batch
  }
}

}  // namespace
}  // namespace monarch

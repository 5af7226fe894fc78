#include "core/cost_model.h"
#include "core/cost_model_internal.h"

#include <gtest/gtest.h>

#include "core/collectives.h"
#include "core/framework_rules.h"

#include <cmath>
#include <cstdio>

#include <filesystem>
#include <tuple>
#include <utility>

#include "core/placement.h"
#include "core/presets.h"
#include "core/profile.h"
#include "core/profile_io.h"
#include "core/units.h"

namespace monarch {
namespace {

ClusterConfig cluster(const char* gpu, int64_t gpus) {
  const GpuPreset* p = find_gpu_preset(gpu);
  EXPECT_NE(p, nullptr) << gpu;
  ClusterConfig c;
  c.gpu = p->spec;
  c.num_gpus = gpus;
  c.gpus_per_node = 8;
  c.intra_node = p->default_intra_node;
  c.inter_node = p->default_inter_node;
  c.nics_per_node = 8;
  return c;
}

Scenario llama8b(const char* gpu, int64_t gpus, Precision prec = Precision::kBf16) {
  Scenario s;
  s.model.architecture = Architecture::kLlama;
  s.model.num_layers = 32;
  s.model.hidden_size = 4096;
  s.model.num_attention_heads = 32;
  s.model.num_kv_heads = 8;
  s.model.ffn_hidden_size = 14336;
  s.model.vocab_size = 128256;
  s.model.seq_length = 8192;
  s.model.tie_embeddings = false;
  s.cluster = cluster(gpu, gpus);
  s.training.global_batch_size = 128;
  s.training.precision = prec;
  return s;
}

// Llama 3 8B on 64 H100 in pure data parallelism at `zero_stage`: 8 micro-batches of 1 per rank.
std::pair<Scenario, Plan> llama8b_data_parallel_8_micro_batches(int64_t zero_stage) {
  Scenario s = llama8b("H100-SXM", 64);
  s.training.global_batch_size = 512;
  Plan p;
  p.dp = 64;
  p.micro_batch_size = 1;
  p.zero_stage = zero_stage;
  return {s, p};
}

Scenario gpt175b(int64_t gpus) {
  Scenario s;
  s.model.architecture = Architecture::kGpt;
  s.model.num_layers = 96;
  s.model.hidden_size = 12288;
  s.model.num_attention_heads = 96;
  s.model.vocab_size = 51200;
  s.model.seq_length = 2048;
  s.cluster = cluster("A100-80GB", gpus);
  s.training.global_batch_size = 64;
  return s;
}

// ---------------------------------------------------------------- collectives

TEST(Collectives, RingFormulasInsideANode) {
  const ClusterConfig c = cluster("A100-80GB", 8);
  GroupSpan g;
  g.size = 8;
  const double S = 1e9;
  const double bw = 300e9 * gpu_profile(c.gpu).nvlink_efficiency;
  const double lat = c.intra_node.latency_us * 1e-6;
  const double base = kNcclCollectiveBaseLatency_s;  // NCCL's fixed cost of a call
  EXPECT_NEAR(collective_time_s(CollectiveKind::kAllReduce, 1000000000, g, c), base + 2.0 * 7 / 8 * S / bw + 14 * lat, 1e-12);
  EXPECT_NEAR(collective_time_s(CollectiveKind::kAllGather, 1000000000, g, c), base + 7.0 / 8 * S / bw + 7 * lat, 1e-12);
  EXPECT_NEAR(collective_time_s(CollectiveKind::kReduceScatter, 1000000000, g, c), base + 7.0 / 8 * S / bw + 7 * lat, 1e-12);
  // nccl-tests: busbw = algbw x 2(n-1)/n for all-reduce; our bus bandwidth is the NVLink
  // bandwidth times the NCCL efficiency (8 GB: the latencies do not show).
  const double algbw = 8 * S / collective_time_s(CollectiveKind::kAllReduce, 8000000000, g, c);
  EXPECT_NEAR(algbw * 2 * 7 / 8 / 1e9, 300 * gpu_profile(c.gpu).nvlink_efficiency, 1.0);
  EXPECT_NEAR(collective_wire_bytes(CollectiveKind::kAllReduce, 800, 8), 1400, 1e-9);
  g.size = 1;
  EXPECT_EQ(collective_time_s(CollectiveKind::kAllReduce, 1000, g, c), 0);
}

// NCCL's all-gather and reduce-scatter are one ring through all n ranks: n - 1 steps, N - 1 of
// them across nodes, the rest on NVLink (src/graph/tuning.cc nsteps / nInterSteps). Over many
// nodes the NVLink steps dominate the latency of a small call.
TEST(Collectives, AllGatherRingLatencyCountsEveryRankAcrossNodes) {
  const ClusterConfig c = cluster("A100-80GB", 1536);
  const GroupSpan g{1536, 192, 8, false, 8};
  const int64_t S = 8;  // bytes: the latency alone
  const double expect = kNcclCollectiveBaseLatency_s + (1536.0 - 192.0) * us_to_s(c.intra_node.latency_us) +
                        191.0 * us_to_s(c.inter_node.latency_us);
  EXPECT_NEAR(collective_time_s(CollectiveKind::kAllGather, S, g, c), expect, 1e-6);
  EXPECT_NEAR(collective_time_s(CollectiveKind::kReduceScatter, S, g, c), expect, 1e-6);
  // All-reduce keeps NCCL's tree over the nodes: far fewer steps.
  EXPECT_LT(collective_time_s(CollectiveKind::kAllReduce, S, g, c), 0.1 * expect);
}

// Across nodes NCCL runs one flat ring per channel, a channel per NIC. Its chunks stream
// through the NVLink and NIC hops at once, so the slower link sets the time (not NVLink time
// plus NIC time), and every chunk crosses every node boundary: on two nodes a GPU's NIC
// carries (n-1)/n of its eighth of the buffer, twice the (N-1)/N of a hierarchical scheme.
TEST(Collectives, AcrossNodesTheRingStreamsThroughNvlinkAndNic) {
  const ClusterConfig c = cluster("A100-80GB", 64);
  const double S = 1e9;
  const double nic = 25e9 * kInterNodeEfficiency;
  const double nvl = 300e9 * gpu_profile(c.gpu).nvlink_efficiency;
  const double lat_intra = us_to_s(c.intra_node.latency_us), lat_inter = us_to_s(c.inter_node.latency_us);
  for (int64_t nodes : {2, 8}) {
    const int64_t n = 8 * nodes;
    const GroupSpan g{n, nodes, 8, false, 8};
    const double nic_s = (n - 1.0) / n * S / 8 / nic;
    const double nvlink_s = (n - 1.0) / n * 7.0 / 8 * S / nvl;
    ASSERT_GT(nic_s, nvlink_s);
    const double ag = collective_time_s(CollectiveKind::kAllGather, static_cast<int64_t>(S), g, c);
    EXPECT_NEAR(ag, kNcclCollectiveBaseLatency_s + (n - nodes) * lat_intra + (nodes - 1) * lat_inter + nic_s, 1e-12) << n;
    EXPECT_LT(ag, kNcclCollectiveBaseLatency_s + nvlink_s + nic_s) << n;
    const double ar = collective_time_s(CollectiveKind::kAllReduce, static_cast<int64_t>(S), g, c);
    EXPECT_NEAR(ar - kNcclCollectiveBaseLatency_s - collective_hops_latency_s(CollectiveKind::kAllReduce, n, nodes, 8, lat_intra, lat_inter),
                2 * nic_s, 1e-12) << n;
  }
  // All-reduce latency: NCCL's tree when shorter than the ring (14 NVLink + 2 log2(N) NIC hops).
  EXPECT_DOUBLE_EQ(collective_hops_latency_s(CollectiveKind::kAllReduce, 64, 8, 8, lat_intra, lat_inter), 14 * lat_intra + 6 * lat_inter);
  EXPECT_DOUBLE_EQ(collective_hops_latency_s(CollectiveKind::kAllGather, 64, 8, 8, lat_intra, lat_inter), 56 * lat_intra + 7 * lat_inter);
  // A slow NVLink paces the ring instead.
  ClusterConfig slow = c;
  slow.intra_node.bandwidth_GBps = 20;
  const GroupSpan two{16, 2, 8, false, 8};
  EXPECT_NEAR(collective_time_s(CollectiveKind::kAllGather, static_cast<int64_t>(S), two, slow),
              kNcclCollectiveBaseLatency_s + 14 * lat_intra + lat_inter + 15.0 / 16 * 7.0 / 8 * S / (20e9 * gpu_profile(c.gpu).nvlink_efficiency), 1e-12);
  // A partly used last node (16 + 16 + 8 members) reaches 8 NICs: NCCL's ranks agree on one
  // channel count, so every node crosses on 8 channels.
  const GroupSpan uneven{40, 3, 16, false, 8};
  ClusterConfig wide = c;
  wide.gpus_per_node = 16;
  wide.nics_per_node = 16;
  const double uneven_nic_s = 39.0 / 40 * S / 8 / nic;
  EXPECT_NEAR(collective_time_s(CollectiveKind::kAllGather, static_cast<int64_t>(S), uneven, wide),
              kNcclCollectiveBaseLatency_s + collective_hops_latency_s(CollectiveKind::kAllGather, 40, 3, 16, lat_intra, lat_inter) +
                  uneven_nic_s, 1e-12);
  // Four NICs for eight GPUs: four channels, so half the members never leave the node and send
  // every chunk on NVLink.
  slow.nics_per_node = 4;
  EXPECT_NEAR(collective_time_s(CollectiveKind::kAllGather, static_cast<int64_t>(S), two, slow),
              kNcclCollectiveBaseLatency_s + 14 * lat_intra + lat_inter + 15.0 / 16 * S / (20e9 * gpu_profile(c.gpu).nvlink_efficiency), 1e-12);
}

TEST(Collectives, AcrossNodesTheNicsPaceTheGroup) {
  const ClusterConfig c = cluster("H100-SXM", 128);
  GroupSpan one_per_node{16, 16, 1, true, 1};   // e.g. DP with tp 8: one rank per node
  GroupSpan full_nodes{16, 2, 8, false, 8};     // two full nodes
  GroupSpan inside{8, 1, 8, false, 8};
  const int64_t S = 1 << 30;
  const double t_inside = collective_time_s(CollectiveKind::kAllReduce, S, inside, c);
  const double t_full = collective_time_s(CollectiveKind::kAllReduce, S, full_nodes, c);
  const double t_one = collective_time_s(CollectiveKind::kAllReduce, S, one_per_node, c);
  EXPECT_LT(t_inside, t_full);
  EXPECT_LT(t_full, t_one);
  // One rank per node: a ring over 16 NICs of 50 GB/s x 0.9.
  // (latency: NCCL trees, 2 log2(16) = 8 steps of 5 us)
  EXPECT_NEAR(t_one, kNcclCollectiveBaseLatency_s + 2.0 * 15 / 16 * S / (50e9 * kInterNodeEfficiency) + 8 * 5e-6, 1e-9);
  // Oversubscribed leaf uplinks slow traffic that leaves the rail.
  ClusterConfig over = c;
  over.oversubscription = 2;
  EXPECT_GT(collective_time_s(CollectiveKind::kAllReduce, S, full_nodes, over), t_full);
  over.topology = Topology::kRailOptimized;
  EXPECT_DOUBLE_EQ(collective_time_s(CollectiveKind::kAllReduce, S, one_per_node, over), t_one);
  // All-to-all across nodes: the off-node share goes over the NIC.
  EXPECT_GT(collective_time_s(CollectiveKind::kAllToAll, S, full_nodes, c),
            collective_time_s(CollectiveKind::kAllToAll, S, inside, c));
}

// All-to-all: every peer in flight at once (NCCL p2p rounds over its channels), so the busiest
// link paces it and one latency is paid, not n - 1.
TEST(AllToAll, InsideANodeIsOneLatencyPlusTheNvlinkShare) {
  const ClusterConfig c = cluster("H100-SXM", 8);
  const GroupSpan inside{8, 1, 8, false, 8};
  const int64_t S = int64_t{1} << 30;
  const double nvl = 450e9 * gpu_profile(c.gpu).nvlink_efficiency;
  EXPECT_NEAR(collective_time_s(CollectiveKind::kAllToAll, S, inside, c), us_to_s(c.intra_node.latency_us) + 7.0 / 8 * S / nvl,
              1e-12);
  // nccl-tests busbw = algbw x (n-1)/n: NVLink 4 at NCCL's ~80% (~360 GB/s; NVIDIA/nccl-tests#212
  // reports ~370 GB/s for non-all-reduce operations on 8 H100).
  const double busbw = S / collective_time_s(CollectiveKind::kAllToAll, S, inside, c) * 7.0 / 8;
  EXPECT_NEAR(busbw, 360e9, 5e9);
}

TEST(AllToAll, AcrossNodesNvlinkAndNicOverlap) {
  const ClusterConfig c = cluster("H100-SXM", 64);
  const int64_t S = int64_t{1} << 30;
  const double nic = 50e9 * kInterNodeEfficiency, nvl = 450e9 * gpu_profile(c.gpu).nvlink_efficiency;
  const double lat = us_to_s(c.inter_node.latency_us);
  for (int64_t nodes : {2, 8}) {
    const int64_t n = 8 * nodes;
    const GroupSpan g{n, nodes, 8, false, 8};
    const double t = collective_time_s(CollectiveKind::kAllToAll, S, g, c);
    const double off = static_cast<double>(n - 8) / n * S / nic, on = 7.0 / n * S / nvl;
    EXPECT_NEAR(t, lat + std::max(off, on), 1e-12) << n;   // max, not off + on
    EXPECT_LT(t, lat + off + on) << n;
    // One latency for up to 256 peers: far below n - 1 latencies in series.
    EXPECT_LT(t, off + (n - 1) * lat) << n;
  }
  // 2 nodes: busbw ~ 2 x the NIC's 45 GB/s x (n-1)/n (nccl-tests#130: N/(N-1) x the network
  // bandwidth per GPU).
  const GroupSpan two{16, 2, 8, false, 8};
  EXPECT_NEAR(S / collective_time_s(CollectiveKind::kAllToAll, S, two, c) * 15 / 16, 2 * nic * 15 / 16, 1e9);
}

TEST(AllToAll, MonotonicInBytesAndMoreNodesNeverFasterPerByte) {
  const ClusterConfig c = cluster("H100-SXM", 512);
  double prev = 0;
  for (int64_t S = 1 << 10; S <= (int64_t{1} << 32); S <<= 2) {
    const double t = collective_time_s(CollectiveKind::kAllToAll, S, GroupSpan{64, 8, 8, false, 8}, c);
    EXPECT_GT(t, prev) << S;
    prev = t;
  }
  for (int64_t S : {int64_t{1} << 12, int64_t{1} << 24, int64_t{1} << 32}) {
    double last = collective_time_s(CollectiveKind::kAllToAll, S, GroupSpan{8, 1, 8, false, 8}, c);
    for (int64_t nodes = 2; nodes <= 64; nodes *= 2) {
      const double t = collective_time_s(CollectiveKind::kAllToAll, S, GroupSpan{8 * nodes, nodes, 8, false, 8}, c);
      EXPECT_GE(t, last) << S << " bytes on " << nodes << " nodes";
      last = t;
    }
  }
  // Beyond 256 peers a second wave of rounds pays a second latency.
  EXPECT_EQ(all_to_all_latency_waves(2), 1);
  EXPECT_EQ(all_to_all_latency_waves(257), 1);
  EXPECT_EQ(all_to_all_latency_waves(258), 2);
}

TEST(AllToAll, RailOptimizedPxnAvoidsOversubscribedUplinks) {
  ClusterConfig fat = cluster("H100-SXM", 64);
  fat.oversubscription = 2;
  ClusterConfig rail = fat;
  rail.topology = Topology::kRailOptimized;
  const int64_t S = int64_t{1} << 30;
  const GroupSpan g{64, 8, 8, false, 8};
  const double nic = 50e9 * kInterNodeEfficiency;
  const double lat = us_to_s(fat.inter_node.latency_us);
  // Fat tree: off-node messages cross the leaf uplinks at half rate.
  EXPECT_NEAR(collective_time_s(CollectiveKind::kAllToAll, S, g, fat), lat + 56.0 / 64 * S / (nic / 2), 1e-12);
  // Rail-optimized: PXN forwards over NVLink to the rail GPU, NIC traffic stays on the rail.
  EXPECT_TRUE(all_to_all_uses_pxn(g, rail));
  const AllToAllLoad load = all_to_all_load(g, rail);
  EXPECT_TRUE(load.on_rail);
  EXPECT_NEAR(load.nic_fraction, 56.0 / 64, 1e-12);
  EXPECT_NEAR(load.nvlink_fraction, 7.0 / 8, 1e-12);  // on-node + forwarded: (r-1)/r
  EXPECT_NEAR(collective_time_s(CollectiveKind::kAllToAll, S, g, rail), lat + 56.0 / 64 * S / nic, 1e-12);
  // A slow NVLink makes the forwarded traffic the bottleneck: max picks it.
  rail.intra_node.bandwidth_GBps = 20;
  const double nvl = 20e9 * gpu_profile(rail.gpu).nvlink_efficiency;
  EXPECT_NEAR(collective_time_s(CollectiveKind::kAllToAll, S, g, rail), lat + 7.0 / 8 * S / nvl, 1e-12);
}

TEST(Collectives, PointToPoint) {
  const ClusterConfig c = cluster("H100-SXM", 16);
  EXPECT_LT(p2p_time_s(64 << 20, false, c), p2p_time_s(64 << 20, true, c));
  EXPECT_NEAR(p2p_time_s(50000000, true, c), 5e-6 + 50e6 / (50e9 * kInterNodeEfficiency), 1e-12);
  EXPECT_EQ(p2p_time_s(0, true, c), 0);
}

// ---------------------------------------------------------------- compute

TEST(Compute, GemmEfficiencyDependsOnShape) {
  const GpuSpec h100 = find_gpu_preset("H100-SXM")->spec;
  const GpuSpec a100 = find_gpu_preset("A100-80GB")->spec;
  // At the MAMF finder's best shape the model gives the measured ceiling (80.1% on H100,
  // 85.9% on A100, ml-engineering) times the sustained-clock fraction.
  EXPECT_NEAR(gemm_efficiency(h100, Precision::kBf16, 6144, 17920, 2816),
              0.801 * gpu_profile(h100).sustained_clock_fraction, 0.01);
  EXPECT_NEAR(gemm_efficiency(a100, Precision::kBf16, 6912, 16384, 2048),
              0.859 * gpu_profile(a100).sustained_clock_fraction, 0.01);
  // Short K, skinny N and few tiles cost efficiency.
  const double big = gemm_efficiency(h100, Precision::kBf16, 8192, 8192, 8192);
  EXPECT_LT(gemm_efficiency(h100, Precision::kBf16, 8192, 8192, 256), big);
  EXPECT_LT(gemm_efficiency(h100, Precision::kBf16, 8192, 64, 8192), big);
  EXPECT_LT(gemm_efficiency(h100, Precision::kBf16, 256, 256, 8192), 0.5 * big);
  EXPECT_LT(big, 1.0);
}

// GB200 reaches less of its quoted peak than B200 (MAMF table, ml-engineering: bf16 1822.0 of
// 2500 against 1745.0 of 2250, fp8 3615.6 of 5000 against 3432.5 of 4500): the same GEMM on
// one GB200 GPU is only 4-5% faster than on a B200, not the 11% their quoted peaks differ by.
TEST(Compute, Gb200GemmsReachTheMeasuredShareOfItsPeak) {
  const GpuSpec b200 = find_gpu_preset("B200")->spec;
  const GpuSpec gb200 = find_gpu_preset("GB200")->spec;
  for (auto [p, measured] : {std::pair{Precision::kBf16, 1822.0 / 1745.0}, std::pair{Precision::kFp8, 3615.6 / 3432.5}}) {
    const double flops = 2.0 * 8192 * 8192 * 8192;
    const double ratio = compute_time_s(b200, p, flops, 0, 8192, 8192, 8192) / compute_time_s(gb200, p, flops, 0, 8192, 8192, 8192);
    EXPECT_NEAR(ratio, measured, 0.002) << to_string(p);
  }
}

// A training step's fp8 GEMMs run at the clock an fp8 product holds at the power cap, on
// Blackwell as on Hopper: per clock a B200's fp8 GEMM reaches what its short MAMF runs give
// against bf16 (3432.5 of 4500 against 1745.0 of 2250), and its clock is the share the H200's
// held fp8 product keeps of the step's sustained clock (1335 MHz against 0.865 x 1830).
TEST(Compute, BlackwellFp8GemmsHoldTheClockFp8HoldsAtThePowerCap) {
  const double per_clock = (3432.5 / 4500.0) / (1745.0 / 2250.0);
  const double held_clock = 1335.0 / (0.865 * 1830.0);
  for (const char* name : {"B200", "GB200"}) {
    const GpuSpec gpu = find_gpu_preset(name)->spec;
    const double ratio = gemm_efficiency(gpu, Precision::kFp8, 8192, 8192, 8192) / gemm_efficiency(gpu, Precision::kBf16, 8192, 8192, 8192);
    // GB200: its own MAMF shares of its peaks, fp8's over bf16's relative to the B200's.
    const double gb200_shares = std::string(name) == "GB200" ? (3615.6 / 3432.5) / (1822.0 / 1745.0) : 1.0;
    EXPECT_NEAR(ratio, per_clock * held_clock * gb200_shares, 1e-3) << name;
  }
  // So on a B200 the fp8 product runs 1.66x as fast as the bf16 one, not the 1.97x short runs show.
  const GpuSpec b200 = find_gpu_preset("B200")->spec;
  const double flops = 2.0 * 8192 * 8192 * 8192;
  const double speedup = compute_time_s(b200, Precision::kBf16, flops, 0, 8192, 8192, 8192) /
                         compute_time_s(b200, Precision::kFp8, flops, 0, 8192, 8192, 8192);
  EXPECT_NEAR(speedup, 2.0 * per_clock * held_clock, 0.02);
}

TEST(Compute, RooflineAndPrecision) {
  const GpuSpec h100 = find_gpu_preset("H100-SXM")->spec;
  const GpuSpec a100 = find_gpu_preset("A100-80GB")->spec;
  const double flops = 2.0 * 8192 * 8192 * 8192;
  const double bytes = 3.0 * 2 * 8192 * 8192;
  const double bf16 = compute_time_s(h100, Precision::kBf16, flops, bytes, 8192, 8192, 8192);
  const double fp8 = compute_time_s(h100, Precision::kFp8, flops, bytes, 8192, 8192, 8192);
  EXPECT_NEAR(bf16, flops / (989.5e12 * gemm_efficiency(h100, Precision::kBf16, 8192, 8192, 8192)), 1e-5);
  EXPECT_LT(fp8, 0.75 * bf16);
  // A100 has no fp8 tensor cores: fp8 runs as bf16.
  EXPECT_DOUBLE_EQ(compute_time_s(a100, Precision::kFp8, flops, bytes, 8192, 8192, 8192),
                   compute_time_s(a100, Precision::kBf16, flops, bytes, 8192, 8192, 8192));
  // An elementwise kernel is bound by HBM bandwidth.
  const double ew = compute_time_s(h100, Precision::kBf16, 0, 1e9, 0, 0, 0);
  EXPECT_NEAR(ew, 1e9 / (3350e9 * gpu_profile(h100).memory_efficiency), 1e-5);
}

// A power cap lowers the tensor cores' clock as the cube root of the dynamic power the cap leaves
// (cap and TDP less the static draw, 88 W of the H100's 700); memory-bound kernels keep HBM's
// rate, and a plan's layers slow down by no more than the clock.
TEST(Compute, PowerCapSlowsTheTensorCoresByTheCubeRootOfTheDynamicPowerRatio) {
  const GpuSpec h100 = find_gpu_preset("H100-SXM")->spec;
  GpuSpec capped = h100;
  capped.power_limit_W = 500;
  const double flops = 2.0 * 8192 * 8192 * 8192;
  const double gemm = compute_time_s(h100, Precision::kBf16, flops, 0, 8192, 8192, 8192);
  const double gemm_capped = compute_time_s(capped, Precision::kBf16, flops, 0, 8192, 8192, 8192);
  EXPECT_NEAR(static_power_W(700), 88.0, 1e-9);
  const double clock_ratio = std::cbrt((700.0 - 88.0) / (500.0 - 88.0));
  EXPECT_NEAR(gemm_capped / gemm, clock_ratio, 1e-3);
  EXPECT_DOUBLE_EQ(compute_time_s(capped, Precision::kBf16, 0, 1e9, 0, 0, 0),
                   compute_time_s(h100, Precision::kBf16, 0, 1e9, 0, 0, 0));
  GpuSpec at_tdp = h100;
  at_tdp.power_limit_W = 700;  // a cap at the TDP changes nothing
  EXPECT_DOUBLE_EQ(compute_time_s(at_tdp, Precision::kBf16, flops, 0, 8192, 8192, 8192), gemm);

  Scenario s;
  s.model = find_model_preset("llama3-8b")->config;
  s.cluster = cluster("H100-SXM", 8);
  s.training.global_batch_size = 8;
  s.training.micro_batch_size = 1;
  Plan p;
  p.dp = 8;
  const LayerCosts full = layer_costs(s, p);
  s.cluster.gpu.power_limit_W = 500;
  const LayerCosts low = layer_costs(s, p);
  EXPECT_GT(low.forward_s, full.forward_s);
  EXPECT_LE(low.forward_s / full.forward_s, clock_ratio + 1e-9);
}

TEST(Compute, ProfilesByGpuName) {
  GpuSpec g;
  g.name = "NVIDIA H100 80GB HBM3";
  EXPECT_STREQ(gpu_profile(g).kind, "H100");
  g.name = "a100-40gb";
  EXPECT_STREQ(gpu_profile(g).kind, "A100");
  g.name = "A800-SXM4-80GB";
  EXPECT_STREQ(gpu_profile(g).kind, "A100");
  g.name = "H800";
  EXPECT_STREQ(gpu_profile(g).kind, "H100");
  g.name = "GB200";
  EXPECT_STREQ(gpu_profile(g).kind, "GB200");  // its own GEMM ceilings (MAMF table)
  g.name = "NVIDIA B200";
  EXPECT_STREQ(gpu_profile(g).kind, "B200");
  g.name = "MI300X";
  EXPECT_STREQ(gpu_profile(g).kind, "generic");
}

// ---------------------------------------------------------------- layers and iterations

TEST(LayerCosts, BackwardIsAboutTwiceForwardAndRecomputeRepeatsIt) {
  Scenario s = llama8b("H100-SXM", 8);
  Plan p;
  p.dp = 8;
  LayerCosts l = layer_costs(s, p);
  EXPECT_GT(l.backward_s, 1.8 * l.forward_s);
  EXPECT_LT(l.backward_s, 2.6 * l.forward_s);
  EXPECT_NEAR(l.backward_flops / l.forward_flops, 2.0, 0.2);
  EXPECT_EQ(l.recompute_s, 0);
  p.recompute = Recompute::kFull;
  l = layer_costs(s, p);
  EXPECT_DOUBLE_EQ(l.recompute_s, l.forward_s);
  p.recompute = Recompute::kSelective;
  l = layer_costs(s, p);
  EXPECT_GT(l.recompute_s, 0);
  EXPECT_LT(l.recompute_s, 0.5 * l.forward_s);
  EXPECT_TRUE(l.collectives.empty());
  EXPECT_GT(l.output_forward_s, 0);
  EXPECT_GT(l.embedding_backward_s, 0);
}

// GPT-3 125M (12 layers, hidden 768) at micro-batch 1 on A100s: its layers' kernels finish
// before Python has dispatched the next ones.
Scenario gpt125m_a100() {
  Scenario s = gpt175b(8);
  s.model.num_layers = 12;
  s.model.hidden_size = 768;
  s.model.num_attention_heads = 12;
  return s;
}

// A host-bound pass leaves the GPU idle between launches, and the TP all-reduces (c10d's NCCL
// stream, no overlap) run in those gaps: the pass takes the host's dispatch time, the same with
// or without the collectives, as long as compute + communication stays below it. The op count
// does not depend on TP, so TP 1's pass is that dispatch time.
TEST(LayerCosts, HostBoundPassesHideTheirTensorParallelCollectives) {
  Scenario s = gpt125m_a100();
  s.training.micro_batch_size = 1;
  Plan tp1;
  tp1.dp = 8;
  const LayerCosts one = layer_costs(s, tp1);
  const double dispatch_s = one.forward_s + one.host_forward_s;
  ASSERT_GT(one.host_forward_s, 0);
  Plan tp2 = tp1;
  tp2.tp = 2;
  tp2.dp = 4;
  const LayerCosts two = layer_costs(s, tp2);
  ASSERT_EQ(two.collectives.size(), 1u);
  const double fwd_comm_s = two.collectives[0].forward_count * two.collectives[0].time_s;
  ASSERT_GT(fwd_comm_s, 0);
  ASSERT_LT(two.forward_s + fwd_comm_s, dispatch_s);
  EXPECT_NEAR(two.forward_s + two.host_forward_s + fwd_comm_s, dispatch_s, 1e-12);
  // GPU-bound, the collectives add to the compute as before: no host excess to hide them in.
  const LayerCosts big = layer_costs(gpt175b(64), tp2);
  EXPECT_EQ(big.host_forward_s, 0);
  EXPECT_GT(big.tp_exposed_s, 0);
}

// With CUDA_LAUNCH_BLOCKING=1 every launch returns when its kernel is done, so the host never
// runs ahead: each pass adds its whole dispatch time (36 forward ops, 72 backward, at the eager
// per-op cost) to the GPU's, GPU-bound or not, and the TP collectives no longer hide under it.
TEST(LayerCosts, LaunchBlockingAddsTheWholeDispatchTimeToEveryPass) {
  Scenario s = gpt175b(64);
  Plan p;
  p.tp = 8;
  p.dp = 8;
  const LayerCosts async = layer_costs(s, p);
  EXPECT_EQ(async.host_forward_s, 0);  // GPU-bound: the host runs ahead
  s.training.cuda_launch_blocking = true;
  const LayerCosts blocking = layer_costs(s, p);
  EXPECT_NEAR(blocking.host_backward_s, 2.0 * blocking.host_forward_s, 1e-12);
  EXPECT_NEAR(blocking.host_forward_s, 36 * 23.2e-6, 1e-9);
  EXPECT_DOUBLE_EQ(blocking.forward_s, async.forward_s);
  EXPECT_GT(estimate_plan(s, p).iteration_time_s, estimate_plan(gpt175b(64), p).iteration_time_s);
  // Host-bound with TP: the pass is the dispatch time plus the collectives, not the larger of them.
  Scenario small = gpt125m_a100();
  small.training.micro_batch_size = 1;
  small.training.cuda_launch_blocking = true;
  Plan tp2;
  tp2.tp = 2;
  tp2.dp = 4;
  const LayerCosts two = layer_costs(small, tp2);
  ASSERT_EQ(two.collectives.size(), 1u);
  EXPECT_NEAR(two.host_forward_s, 36 * 23.2e-6, 1e-9);
  EXPECT_GT(two.tp_exposed_s, 0);
}

TEST(LayerCosts, CudaGraphsReplaceTheEagerHostFloor) {
  Scenario s = gpt125m_a100();
  Plan p;
  p.dp = 8;
  const LayerCosts eager = layer_costs(s, p);
  EXPECT_GT(eager.host_forward_s, 0);
  EXPECT_GT(eager.host_backward_s, 0);
  s.training.cuda_graphs = true;
  const LayerCosts graphed = layer_costs(s, p);
  // Three host ops per graph replay hide behind the replayed kernels; the GPU work is the same.
  EXPECT_EQ(graphed.host_forward_s, 0);
  EXPECT_EQ(graphed.host_backward_s, 0);
  EXPECT_DOUBLE_EQ(graphed.forward_s, eager.forward_s);
  EXPECT_DOUBLE_EQ(graphed.backward_s, eager.backward_s);
  const BackendResult r_eager = estimate_plan(gpt125m_a100(), p);
  const BackendResult r_graphed = estimate_plan(s, p);
  EXPECT_LT(r_graphed.iteration_time_s, r_eager.iteration_time_s);
  EXPECT_GT(r_eager.time_breakdown_s.host, 0);
  EXPECT_EQ(r_graphed.time_breakdown_s.host, 0);
  EXPECT_NEAR(quick_estimate(s, p).iteration_time_s, r_graphed.iteration_time_s, 1e-9 * r_graphed.iteration_time_s);
  // Megatron-Core's per-layer graphs run neither full recompute nor, with attention dropout (GPT's
  // default 0.1), a recomputed attention core: such plans leave the plan space with the reason.
  p.recompute = Recompute::kFull;
  EXPECT_NE(quick_estimate(s, p).reject_reason.find("full recompute"), std::string::npos) << quick_estimate(s, p).reject_reason;
  EXPECT_EQ(quick_estimate(gpt125m_a100(), p).reject_reason, "");
  p.recompute = Recompute::kSelective;
  EXPECT_NE(quick_estimate(s, p).reject_reason.find("attention dropout"), std::string::npos) << quick_estimate(s, p).reject_reason;
  s.model.attention_dropout = 0.0;
  EXPECT_EQ(quick_estimate(s, p).reject_reason, "");
}

// A time bound stops a fitting plan at a lower bound once that exceeds the bound: never above
// the whole estimate, and flagged. A plan under the bound and one that does not fit are estimated
// as without a bound.
TEST(QuickEstimate, TimeBoundStopsPipelinePlansAtALowerBound) {
  const Scenario s = gpt175b(128);
  for (const auto [pp, vpp] : {std::pair{8, 1}, std::pair{8, 3}, std::pair{16, 1}, std::pair{16, 2}}) {
    Plan p;
    p.tp = 8;
    p.pp = pp;
    p.dp = 128 / (8 * pp);
    p.vpp = vpp;
    p.schedule = vpp > 1 ? Schedule::kInterleaved : Schedule::kOneFOneB;
    p.sequence_parallel = true;
    p.recompute = Recompute::kSelective;
    p.zero_stage = 1;
    const QuickEstimate whole = quick_estimate(s, p);
    ASSERT_TRUE(whole.fits) << describe(p) << " " << whole.reject_reason;
    EXPECT_FALSE(whole.time_is_lower_bound);
    // Under a bound of 0, the busiest stage's compute; under that bound, the time without the
    // bubble; both below the whole estimate.
    const QuickEstimate compute_only = quick_estimate(s, p, MisfitTime::kEstimate, 0.0);
    EXPECT_TRUE(compute_only.time_is_lower_bound) << describe(p);
    EXPECT_GT(compute_only.iteration_time_s, 0);
    EXPECT_EQ(compute_only.peak_memory_gib, whole.peak_memory_gib);
    const QuickEstimate no_bubble = quick_estimate(s, p, MisfitTime::kEstimate, compute_only.iteration_time_s);
    EXPECT_TRUE(no_bubble.time_is_lower_bound) << describe(p);
    EXPECT_GT(no_bubble.iteration_time_s, compute_only.iteration_time_s) << describe(p);
    EXPECT_LT(no_bubble.iteration_time_s, whole.iteration_time_s) << describe(p) << ": the bubble is left out";
    const QuickEstimate under = quick_estimate(s, p, MisfitTime::kEstimate, whole.iteration_time_s * 1.01);
    EXPECT_FALSE(under.time_is_lower_bound);
    EXPECT_EQ(under.iteration_time_s, whole.iteration_time_s);
    Plan misfit = p;  // without TP: a sixteenth of 175B parameters or more per GPU
    misfit.tp = 1;
    misfit.dp = 128 / pp;
    misfit.sequence_parallel = false;
    const QuickEstimate big = quick_estimate(s, misfit, MisfitTime::kEstimate, 0.0);
    ASSERT_FALSE(big.fits) << describe(misfit);
    EXPECT_FALSE(big.time_is_lower_bound);
    EXPECT_EQ(big.iteration_time_s, quick_estimate(s, misfit).iteration_time_s);
  }
  const Scenario one_node = llama8b("H100-SXM", 8);
  Plan flat;
  flat.dp = 8;
  flat.zero_stage = 1;
  flat.recompute = Recompute::kFull;
  const QuickEstimate no_pipeline = quick_estimate(one_node, flat);
  ASSERT_TRUE(no_pipeline.fits) << no_pipeline.reject_reason;
  const QuickEstimate compute_only = quick_estimate(one_node, flat, MisfitTime::kEstimate, 0.0);
  EXPECT_TRUE(compute_only.time_is_lower_bound);
  EXPECT_GT(compute_only.iteration_time_s, 0.9 * no_pipeline.iteration_time_s) << "the layers' compute is most of it";
  EXPECT_LT(compute_only.iteration_time_s, no_pipeline.iteration_time_s);
  const QuickEstimate under = quick_estimate(one_node, flat, MisfitTime::kEstimate, no_pipeline.iteration_time_s * 1.01);
  EXPECT_FALSE(under.time_is_lower_bound);
  EXPECT_EQ(under.iteration_time_s, no_pipeline.iteration_time_s);
}

// Megatron-DeepSpeed computes the loss on an fp32 copy of the logits with the unfused cross
// entropy: 38 bytes per logit forward and 14 backward against the fused kernels' 14 and 10.
TEST(LayerCosts, DeepspeedLossRunsTheUnfusedCrossEntropyOnFp32Logits) {
  Scenario s = gpt125m_a100();
  Plan p;
  p.dp = 8;
  const LayerCosts fused = layer_costs(s, p);
  s.training.framework = Framework::kDeepspeed;
  const LayerCosts unfused = layer_costs(s, p);
  const ModelShape m = model_shape(s.model);
  const double logits = static_cast<double>(p.micro_batch_size * m.seq) * static_cast<double>(m.vocab);
  EXPECT_NEAR(unfused.output_forward_mem_bytes - fused.output_forward_mem_bytes, (38.0 - 14.0) * logits, 1e-6 * logits);
  EXPECT_NEAR(unfused.output_backward_mem_bytes - fused.output_backward_mem_bytes, (14.0 - 10.0) * logits, 1e-6 * logits);
  EXPECT_GT(unfused.output_forward_s, fused.output_forward_s);
  EXPECT_GT(unfused.output_backward_s, fused.output_backward_s);
  // The layers themselves are the same kernels.
  EXPECT_DOUBLE_EQ(unfused.forward_s, fused.forward_s);
}

// Megatron-Core without --cross-entropy-loss-fusion (Megatron-LM's default) runs the same
// unfused steps on an fp32 copy of the logits as Megatron-DeepSpeed.
TEST(LayerCosts, MegatronWithoutLossFusionRunsTheUnfusedCrossEntropy) {
  Scenario s = gpt125m_a100();
  Plan p;
  p.dp = 8;
  const LayerCosts fused = layer_costs(s, p);
  s.training.cross_entropy_loss_fusion = true;
  EXPECT_DOUBLE_EQ(layer_costs(s, p).output_forward_mem_bytes, fused.output_forward_mem_bytes);
  s.training.cross_entropy_loss_fusion = false;
  const LayerCosts unfused = layer_costs(s, p);
  s.training.framework = Framework::kDeepspeed;
  s.training.cross_entropy_loss_fusion.reset();
  const LayerCosts deepspeed = layer_costs(s, p);
  EXPECT_DOUBLE_EQ(unfused.output_forward_mem_bytes, deepspeed.output_forward_mem_bytes);
  EXPECT_DOUBLE_EQ(unfused.output_backward_mem_bytes, deepspeed.output_backward_mem_bytes);
  EXPECT_GT(unfused.output_forward_s + unfused.output_backward_s, fused.output_forward_s + fused.output_backward_s);
  EXPECT_DOUBLE_EQ(unfused.forward_s, fused.forward_s);
}

// DeepSpeed's BF16_Optimizer (bf16 at ZeRO stage 0) adds every micro-batch's gradients into its
// fp32 buffers after the backward: 18 bytes per parameter (read the bf16 gradient, write its
// fp32 cast, read it and the accumulator, write the accumulator), the word embedding's 10 more
// than the fp32 accumulation every plan pays, and again on the tied output layer's copy on the
// last stage. At ZeRO-1 (DeepSpeed's ZeRO optimizer) and in fp16 (FP16_Optimizer) it does not run.
TEST(LayerCosts, DeepspeedBf16OptimizerAccumulatesEachMicroBatchsGradientsInFp32) {
  Scenario s = gpt125m_a100();
  s.training.framework = Framework::kDeepspeed;
  Plan p;
  p.dp = 4;
  p.pp = 2;
  p.zero_stage = 1;
  const LayerCosts zero1 = layer_costs(s, p);
  p.zero_stage = 0;
  const LayerCosts bf16_opt = layer_costs(s, p);
  const ModelShape m = model_shape(s.model);
  const double layer = layer_parameters(m, p).total(), embedding = static_cast<double>(m.vocab * m.hidden);
  EXPECT_NEAR(bf16_opt.backward_mem_bytes - zero1.backward_mem_bytes, 18.0 * layer, 1e-6 * layer);
  EXPECT_NEAR(bf16_opt.embedding_backward_mem_bytes - zero1.embedding_backward_mem_bytes, 10.0 * embedding, 1e-6 * embedding);
  EXPECT_NEAR(bf16_opt.output_backward_mem_bytes - zero1.output_backward_mem_bytes, 18.0 * embedding, 1e-6 * embedding);
  EXPECT_GT(bf16_opt.backward_s, zero1.backward_s);
  EXPECT_DOUBLE_EQ(bf16_opt.forward_s, zero1.forward_s);
  // A cast and an add for each of a GPT layer's 12 parameter tensors (4 weights, 4 biases, 2
  // LayerNorms of weight and bias): 24 more ops for the host in the backward, whole under
  // CUDA_LAUNCH_BLOCKING.
  s.training.cuda_launch_blocking = true;
  p.zero_stage = 1;
  const double host_zero1 = layer_costs(s, p).host_backward_s;
  p.zero_stage = 0;
  EXPECT_NEAR(layer_costs(s, p).host_backward_s - host_zero1, 24 * 23.2e-6, 1e-9);
  s.training.cuda_launch_blocking = false;
  s.training.precision = Precision::kFp16;
  const LayerCosts fp16_opt = layer_costs(s, p);
  p.zero_stage = 1;
  EXPECT_DOUBLE_EQ(fp16_opt.backward_mem_bytes, layer_costs(s, p).backward_mem_bytes);
}

// Megatron-LM's fused softmax needs the attention batches (micro-batch x local heads) to be a
// multiple of 4; GPT 350M-size at TP 8 has 2 local heads, so micro-batch 1 runs the softmax op
// by op in fp32 (37 bytes per score forward, 41 backward, against 4 and 6 fused). The layer's
// bytes are affine in the micro-batch where the kernel is fused (2 and 4), which gives the fused
// figure at 1.
TEST(LayerCosts, MegatronSoftmaxRunsUnfusedWhenTheAttentionBatchesAreNotAMultipleOfFour) {
  Scenario s = gpt125m_a100();
  s.model.hidden_size = 1024;
  s.model.num_attention_heads = 16;
  s.model.seq_length = 1024;
  s.model.attention_kernel = AttentionKernel::kMaterialized;
  s.training.precision = Precision::kFp16;
  Plan p;
  p.tp = 8;
  auto bytes = [&](int64_t mb) {
    p.micro_batch_size = mb;
    const LayerCosts l = layer_costs(s, p);
    return std::pair<double, double>{l.forward_mem_bytes, l.backward_mem_bytes};
  };
  const auto [f1, b1] = bytes(1);
  const auto [f2, b2] = bytes(2);
  const auto [f4, b4] = bytes(4);
  const double scores = 1.0 * 2 * 1024 * 1024;
  EXPECT_NEAR(f1 - (f2 - (f4 - f2) / 2), (37.0 - 4.0) * scores, 1e-6 * f1);
  EXPECT_NEAR(b1 - (b2 - (b4 - b2) / 2), (41.0 - 6.0) * scores, 1e-6 * b1);
}

// torchtitan's block in eager PyTorch (training.compile off): the RMSNorms, the rotary embedding,
// SwiGLU and repeat_kv each pass over HBM op by op, beyond the fused passes, bytes per element
// as counted in core/layer_cost.cc; torch.compile leaves the fused count.
TEST(LayerCosts, TorchtitanEagerBlockRunsEachOpAsItsOwnKernel) {
  Scenario s = llama8b("A100-80GB", 8);
  s.training.framework = Framework::kTorchtitan;
  Plan p;
  p.dp = 8;
  p.zero_stage = 3;
  const LayerCosts eager = layer_costs(s, p);
  s.training.compile = true;
  const LayerCosts compiled = layer_costs(s, p);
  const double T = 8192, h = 4096, q = 4096, kv = 1024, f = 14336;
  const double extra_fwd = 2 * (36 - 4) * h * T + (20 - 4) * (q + kv) * T + (10 - 6) * f * T + 2 * 2 * 2 * q * T;
  const double extra_bwd = 2 * (76 - 8) * h * T + (20 - 8) * (q + kv) * T + (18 - 12) * f * T + 2 * 2 * (q + kv) * T;
  EXPECT_NEAR(eager.forward_mem_bytes - compiled.forward_mem_bytes, extra_fwd, 1e-6 * extra_fwd);
  EXPECT_NEAR(eager.backward_mem_bytes - compiled.backward_mem_bytes, extra_bwd, 1e-6 * extra_bwd);
  EXPECT_DOUBLE_EQ(eager.forward_flops, compiled.forward_flops);
  EXPECT_GT(eager.forward_s, compiled.forward_s);
  // The loss is F.cross_entropy on fp32 logits eagerly: 22 + 26 bytes per logit.
  const double logits = T * 128256;
  EXPECT_NEAR(eager.output_forward_mem_bytes - compiled.output_forward_mem_bytes, (22.0 - 14.0) * logits, 1e-6 * logits);
  // wq, wk, wv and w1, w3 are separate GEMMs: the same FLOPs as Megatron's fused QKV and fc1.
  s.training.framework = Framework::kMegatron;
  s.training.compile = false;
  EXPECT_NEAR(layer_costs(s, p).forward_flops, compiled.forward_flops, 1e-9 * compiled.forward_flops);
}

// A GPT block's LayerNorm is nn.LayerNorm, one ATen kernel each way (native_layer_norm and its
// backward): eager, it moves the fused kernel's bytes, where torchtitan's RMSNorm runs op by op.
// GPT has no rotary embedding, no SwiGLU and no grouped-query attention, so its eager block
// moves what the compiled one does; only the launches differ.
TEST(LayerCosts, EagerLayerNormIsOneKernel) {
  Scenario s = gpt125m_a100();
  s.training.framework = Framework::kTorchtitan;
  Plan p;
  p.dp = 1;
  const LayerCosts eager = layer_costs(s, p);
  s.training.compile = true;
  const LayerCosts compiled = layer_costs(s, p);
  EXPECT_DOUBLE_EQ(eager.forward_mem_bytes, compiled.forward_mem_bytes);
  EXPECT_DOUBLE_EQ(eager.backward_mem_bytes, compiled.backward_mem_bytes);
  EXPECT_GT(eager.backward_s, compiled.backward_s);  // the weight-gradient reductions' launches
  EXPECT_LT(eager.backward_s - compiled.backward_s, 0.05 * compiled.backward_s);
}

// FSDP2 copies each gathered layer out of the all-gather buffer (read + write of the unsharded
// bf16 weights) before the forward and, under ZeRO-3, again before the backward, and copies the
// layer's bf16 gradients into the fp32 reduce-scatter buffer, all on the compute stream.
TEST(LayerCosts, Fsdp2CopiesGatheredWeightsAndGradientsOnTheComputeStream) {
  Scenario s = llama8b("H100-SXM", 8);
  s.training.framework = Framework::kTorchtitan;
  const ModelShape m = model_shape(s.model);
  Plan p;
  p.dp = 8;
  auto compute = [&](int zero) {
    p.zero_stage = zero;
    return cost_detail::layer_compute(cost_detail::make_ctx(s), m, p);
  };
  const cost_detail::LayerCompute ddp = compute(0), zero2 = compute(2), zero3 = compute(3);
  const double P = layer_parameters(m, p).total();
  EXPECT_NEAR(P, 2 * 4096.0 * 4096 + 2 * 4096.0 * 1024 + 3 * 4096.0 * 14336 + 2 * 4096, 1.0);  // q, o; k, v; MLP; norms
  EXPECT_DOUBLE_EQ(zero3.fwd.bytes - ddp.fwd.bytes, 2 * 2 * P);                  // copy-out
  EXPECT_DOUBLE_EQ(zero3.bwd.bytes - ddp.bwd.bytes, 2 * 2 * P + (2 + 4) * P);    // copy-out, bf16 -> fp32 copy-in
  EXPECT_DOUBLE_EQ(zero2.fwd.bytes - ddp.fwd.bytes, 2 * 2 * P);
  EXPECT_DOUBLE_EQ(zero2.bwd.bytes - ddp.bwd.bytes, (2 + 4) * P);                // kept gathered for the backward
  EXPECT_GT(zero3.bwd.s - ddp.bwd.s, 10 * P / cost_detail::hbm_bytes_per_s(s.cluster.gpu, gpu_profile(s.cluster.gpu)));
  EXPECT_DOUBLE_EQ(zero3.recompute.bytes, ddp.recompute.bytes);                   // no gather again
  // A bf16 reduction writes 2 bytes per gradient; Megatron's and DeepSpeed's buffers need no copy;
  // nothing is sharded on one rank.
  s.training.grad_reduce_in_fp32 = false;
  EXPECT_DOUBLE_EQ(compute(2).bwd.bytes - ddp.bwd.bytes, (2 + 2) * P);
  for (Framework f : {Framework::kMegatron, Framework::kDeepspeed}) {
    s.training.framework = f;
    EXPECT_DOUBLE_EQ(compute(3).fwd.bytes, compute(0).fwd.bytes);
  }
  s.training.framework = Framework::kTorchtitan;
  p.dp = 1;
  EXPECT_DOUBLE_EQ(compute(3).fwd.bytes, compute(0).fwd.bytes);
}

// torchtitan's attention is PyTorch's scaled_dot_product_attention, whose default picks
// FlashAttention-2: on Hopper a third of the peak where Megatron's cuDNN / FlashAttention-3
// kernels reach two thirds; on Ampere both run FlashAttention-2.
TEST(LayerCosts, TorchtitanAttentionIsFlashAttention2OnHopper) {
  for (const char* gpu : {"H100-SXM", "A100-80GB"}) {
    Scenario s = llama8b(gpu, 8);
    Plan p;
    p.dp = 8;
    p.zero_stage = 0;  // replicated: FSDP2's copies around its collectives have their own test
    const LayerCosts megatron = layer_costs(s, p);
    s.training.framework = Framework::kTorchtitan;
    s.training.compile = true;
    const LayerCosts titan = layer_costs(s, p);
    const double attention_flops = 4.0 * 8192 * 8192 * 0.5 * 4096;  // causal half, forward
    const double peak = s.cluster.gpu.peak_tflops.bf16 * 1e12 * gpu_profile(s.cluster.gpu).sustained_clock_fraction;
    // FlashAttention-2 falls off as s / (s + 256); the H100 profile's fused kernels as its own.
    const GpuProfile& prof = gpu_profile(s.cluster.gpu);
    const double fa2 = 0.333 * 8192.0 / (8192.0 + 256.0);
    const double fused = prof.flash_forward_efficiency * 8192.0 / (8192.0 + prof.attention_kernel->seq_half_tokens);
    const double expected = std::string(gpu) == "H100-SXM" ? attention_flops / peak * (1.0 / fa2 - 1.0 / fused) : 0.0;
    // Separate projections cost a few wave-quantization percent beside it; the attention term is
    // the difference that remains.
    const double gemm_gap = titan.forward_s - megatron.forward_s - expected;
    EXPECT_LT(std::fabs(gemm_gap), 0.03 * megatron.forward_s) << gpu;
    if (expected > 0) EXPECT_GT(titan.forward_s - megatron.forward_s, 0.5 * expected) << gpu;
  }
}

// Layer costs of pure data parallelism over the scenario's GPUs at `zero_stage`, with the
// scenario's attention kernel and with `other`. Fused kernels all keep flash's memory (no
// scores stored): the plan's peak is the same with both.
std::pair<LayerCosts, LayerCosts> costs_with_kernel(Scenario s, int64_t zero_stage, AttentionKernel other) {
  Plan p;
  p.dp = s.cluster.num_gpus;
  p.zero_stage = zero_stage;
  const LayerCosts before = layer_costs(s, p);
  const double before_gib = estimate_plan(s, p).memory.peak_gib;
  s.model.attention_kernel = other;
  EXPECT_EQ(estimate_plan(s, p).memory.peak_gib, before_gib) << s.cluster.gpu.name;
  return {before, layer_costs(s, p)};
}

// Llama 8B on 8 GPUs under torchtitan, whose attention is FlashAttention-2 on A100 and H100 (on
// Hopper PyTorch SDPA's, not the profile's cuDNN kernels), and the forward attention core's time
// at that rate: 8192 tokens, the causal half, 32 heads of 128.
struct Fa2Reference {
  Scenario scenario;
  double forward_attention_s = 0;
};
Fa2Reference fa2_reference(const char* gpu) {
  Fa2Reference r{llama8b(gpu, 8)};
  r.scenario.training.framework = Framework::kTorchtitan;
  r.scenario.training.compile = true;
  const GpuProfile& prof = gpu_profile(r.scenario.cluster.gpu);
  const double peak = r.scenario.cluster.gpu.peak_tflops.bf16 * 1e12 * prof.sustained_clock_fraction;
  const double rate = (std::string(gpu) == "H100-SXM" ? 0.333 : prof.flash_forward_efficiency) * 8192.0 / (8192.0 + 256.0);
  r.forward_attention_s = 4.0 * 8192 * 8192 * 0.5 * 4096 / (peak * rate);
  return r;
}

// model.attention_kernel "flash1" (FlashAttention-1's CUDA kernels): the attention core at half
// FlashAttention-2's rate on that GPU, forward and backward; the memory of flash (no scores
// kept); everything else unchanged.
TEST(LayerCosts, Flash1AttentionRunsAtHalfFlashAttention2sRate) {
  for (const char* gpu : {"A100-80GB", "H100-SXM"}) {
    const Fa2Reference ref = fa2_reference(gpu);
    const auto [fa2, fa1] = costs_with_kernel(ref.scenario, 0, AttentionKernel::kFlash1);
    const double attention_fa2_s = ref.forward_attention_s;
    EXPECT_NEAR(fa1.forward_s - fa2.forward_s, attention_fa2_s, 1e-3 * attention_fa2_s) << gpu;
    EXPECT_GT(fa1.backward_s - fa2.backward_s, 2.0 * attention_fa2_s) << gpu;  // the backward's 2.5x FLOPs, slower rate
  }
}

// model.attention_kernel "flash1-triton" (FlashAttention's Triton port, llm-foundry's attn_impl
// "triton"): FlashAttention-2's rate over 1.4 forward and over 2 backward (FlashAttention-2
// paper, section 4.1), so its forward is faster than FlashAttention-1's and its backward the same;
// the memory of flash.
TEST(LayerCosts, TritonFlashAttentionRunsFlashAttention2sRateOverItsPerPassRatios) {
  for (const char* gpu : {"A100-80GB", "H100-SXM"}) {
    const Fa2Reference ref = fa2_reference(gpu);
    const auto [fa2, triton] = costs_with_kernel(ref.scenario, 0, AttentionKernel::kFlash1Triton);
    const auto [fa2_again, fa1] = costs_with_kernel(ref.scenario, 0, AttentionKernel::kFlash1);
    const double attention_fa2_s = ref.forward_attention_s;
    EXPECT_NEAR(triton.forward_s - fa2.forward_s, 0.4 * attention_fa2_s, 1e-3 * attention_fa2_s) << gpu;
    EXPECT_LT(triton.forward_s, fa1.forward_s) << gpu;
    EXPECT_NEAR(triton.backward_s, fa1.backward_s, 1e-9 * fa1.backward_s) << gpu;
  }
}

// model.attention_kernel "flash2" (the flash-attn package Transformer Engine calls when cuDNN's
// attention is off): on Hopper the attention core takes 1.59x the cuDNN kernels' time in both
// passes at every sequence length; on Ampere, whose profile is FlashAttention-2 already,
// nothing changes; flash's memory either way.
TEST(LayerCosts, Flash2AttentionOnHopperRunsCudnnsRateOverTheMeasuredRatio) {
  for (const char* gpu : {"H100-SXM", "A100-80GB"}) {
    for (double seq : {2048.0, 32768.0}) {
      Scenario s = llama8b(gpu, 8);
      s.model.seq_length = static_cast<int64_t>(seq);
      const auto [cudnn, fa2] = costs_with_kernel(s, 1, AttentionKernel::kFlash2);
      const GpuProfile& prof = gpu_profile(s.cluster.gpu);
      const double peak = s.cluster.gpu.peak_tflops.bf16 * 1e12 * prof.sustained_clock_fraction;
      const double work = 4.0 * seq * seq * 0.5 * 4096;                           // causal half, forward
      const double shape = seq / (seq + prof.attention_kernel->seq_half_tokens);  // head dim 128
      const double cudnn_fwd_s = work / (peak * prof.flash_forward_efficiency * shape);
      const double cudnn_bwd_s = 2.5 * work / (peak * prof.flash_backward_efficiency * shape);
      const double extra = std::string(gpu) == "H100-SXM" ? (1.5877 + 1.5968) / 2.0 - 1.0 : 0.0;
      EXPECT_NEAR(fa2.forward_s - cudnn.forward_s, extra * cudnn_fwd_s, 1e-3 * cudnn_fwd_s) << gpu << " " << seq;
      EXPECT_NEAR(fa2.backward_s - cudnn.backward_s, extra * cudnn_bwd_s, 1e-3 * cudnn_bwd_s) << gpu << " " << seq;
    }
  }
}

// Megatron-DeepSpeed has no Transformer Engine attention: its flash path is the flash-attn
// package, so under training.framework "deepspeed" the default kernel costs what "flash2" does
// (on Hopper slower than Megatron's cuDNN attention, the same on Ampere).
TEST(LayerCosts, DeepspeedFlashAttentionIsTheFlashAttnPackage) {
  for (const char* gpu : {"H100-SXM", "A100-80GB"}) {
    Scenario s = llama8b(gpu, 8);
    s.training.framework = Framework::kDeepspeed;
    const auto [flash, package] = costs_with_kernel(s, 1, AttentionKernel::kFlash2);
    EXPECT_DOUBLE_EQ(flash.forward_s, package.forward_s) << gpu;
    EXPECT_DOUBLE_EQ(flash.backward_s, package.backward_s) << gpu;
    s.training.framework = Framework::kMegatron;
    const auto [cudnn, megatron_package] = costs_with_kernel(s, 1, AttentionKernel::kFlash2);
    if (std::string(gpu) == "H100-SXM") EXPECT_GT(megatron_package.forward_s, cudnn.forward_s);
    else EXPECT_DOUBLE_EQ(megatron_package.forward_s, cudnn.forward_s);
  }
}

// torchtitan's selective recompute is its op-level policy: wk, wo and w3 and every elementwise
// op run again in the backward, and only the block input, wq, wv, w1, w2 and the attention
// output stay saved.
TEST(LayerCosts, TorchtitanSelectiveRecomputeIsTheOpLevelPolicy) {
  Scenario s = llama8b("A100-80GB", 8);
  s.training.framework = Framework::kTorchtitan;
  s.training.compile = true;
  Plan p;
  p.dp = 8;
  p.zero_stage = 3;
  p.recompute = Recompute::kSelective;
  const LayerCosts l = layer_costs(s, p);
  const double T = 8192, h = 4096, kv = 1024, q = 4096, f = 14336;
  EXPECT_NEAR(l.recompute_flops, 2 * T * h * (kv + q + f), 1e-9 * l.recompute_flops);
  const ModelShape m = model_shape(s.model);
  const double kept = 2 * T * h + 2 * T * (2 * q + kv + f) + 2 * T * h + 4 * 32 * T;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, 1, 1, 1, false, Recompute::kSelective, 2.0, 0, 0, Framework::kTorchtitan), kept);
  EXPECT_LT(kept, layer_activation_bytes(m, 1, 1, 1, false, Recompute::kSelective, 2.0));
}

TEST(Memory, CudaGraphsKeepTheirPassesTemporariesAllocated) {
  Scenario s = llama8b("H100-SXM", 8);
  const ModelShape m = model_shape(s.model);
  Plan p;
  p.dp = 8;
  const MemoryBreakdown eager = stage_memory(m, s, p, 0, 32);
  s.training.cuda_graphs = true;
  const MemoryBreakdown graphed = stage_memory(m, s, p, 0, 32);
  EXPECT_DOUBLE_EQ(graphed.activations_bytes, 1.2 * eager.activations_bytes);
  EXPECT_DOUBLE_EQ(graphed.weights_bytes, eager.weights_bytes);
  EXPECT_DOUBLE_EQ(graphed.optimizer_bytes, eager.optimizer_bytes);
}

TEST(LayerCosts, TensorParallelCollectivesPerLayer) {
  Scenario s = gpt175b(64);
  Plan p;
  p.tp = 8;
  p.pp = 8;
  LayerCosts l = layer_costs(s, p);
  ASSERT_EQ(l.collectives.size(), 1u);
  EXPECT_EQ(l.collectives[0].kind, CollectiveKind::kAllReduce);
  EXPECT_EQ(l.collectives[0].bytes, 2 * 2048 * 12288);
  EXPECT_EQ(l.collectives[0].forward_count, 2);
  EXPECT_EQ(l.collectives[0].backward_count, 2);
  EXPECT_NEAR(l.tp_exposed_s, 4 * l.collectives[0].time_s, 1e-12);
  p.sequence_parallel = true;
  l = layer_costs(s, p);
  ASSERT_EQ(l.collectives.size(), 2u);
  EXPECT_EQ(l.collectives[0].kind, CollectiveKind::kAllGather);
  EXPECT_EQ(l.collectives[1].kind, CollectiveKind::kReduceScatter);
  // The pipeline message is 1/t of the activation.
  EXPECT_EQ(l.pp_message_bytes, 2 * 2048 * 12288 / 8);
  // Overlapping TP communication with the GEMMs hides some of it.
  const double exposed = l.tp_exposed_s;
  p.tp_comm_overlap = true;
  EXPECT_LT(layer_costs(s, p).tp_exposed_s, exposed);
}

// The fused-attention rate per head dim: the measured point at a measured dim, linear between
// two, the end's beyond the measured range.
TEST(Compute, HeadDimRateIsLinearBetweenMeasuredDimsAndFlatBeyond) {
  const HeadDimRates& fa2 = kFlash2Attention.head_dims;
  const HeadDimRates& cudnn = kCudnnHopperAttention.head_dims;
  EXPECT_DOUBLE_EQ(head_dim_rate(fa2, 128), 1.0);
  EXPECT_DOUBLE_EQ(head_dim_rate(fa2, 160), fa2.at[5]);
  EXPECT_DOUBLE_EQ(head_dim_rate(fa2, 144), 0.5 * (1.0 + fa2.at[5]));
  EXPECT_DOUBLE_EQ(head_dim_rate(cudnn, 32), cudnn.at[0]);
  EXPECT_DOUBLE_EQ(head_dim_rate(cudnn, 512), cudnn.at[kHeadDimPoints - 1]);
  EXPECT_DOUBLE_EQ(head_dim_rate(kBlackwellAttention.head_dims, 160), 1.0);
}

// Without sequence parallelism the pipeline message is still 1/t per TP rank, in Megatron (its
// scatter/gather) and in DeepSpeed's PipelineEngine, which partitions the activation and its
// gradient over the model-parallel group whenever that group has more than one rank.
TEST(LayerCosts, PipelineMessageIsOneTensorParallelShardInMegatronAndDeepspeed) {
  Scenario s = gpt175b(64);
  Plan p;
  p.tp = 8;
  p.pp = 8;
  const int64_t shard_bytes = int64_t{2} * 2048 * 12288 / 8;
  EXPECT_EQ(layer_costs(s, p).pp_message_bytes, shard_bytes);
  s.training.framework = Framework::kDeepspeed;
  EXPECT_EQ(layer_costs(s, p).pp_message_bytes, shard_bytes);
  p.tp = 1;
  p.pp = 64;
  EXPECT_EQ(layer_costs(s, p).pp_message_bytes, 8 * shard_bytes);
}

// Fp8 (Transformer Engine) gathers the fp8-cast inputs and output gradients: the sequence-
// parallel all-gathers move half the bytes of bf16 and take less time; the reduce-scatters of
// the 16-bit GEMM outputs do not change.
TEST(LayerCosts, Fp8SequenceParallelAllGathersMoveOneBytePerElement) {
  Scenario s = gpt175b(64);
  s.cluster.gpu = find_gpu_preset("H100-SXM")->spec;
  Plan p;
  p.tp = 8;
  p.pp = 8;
  p.sequence_parallel = true;
  const LayerCosts bf16 = layer_costs(s, p);
  s.training.precision = Precision::kFp8;
  const LayerCosts fp8 = layer_costs(s, p);
  ASSERT_EQ(bf16.collectives.size(), 2u);
  ASSERT_EQ(fp8.collectives.size(), 2u);
  EXPECT_EQ(fp8.collectives[0].kind, CollectiveKind::kAllGather);
  EXPECT_EQ(2 * fp8.collectives[0].bytes, bf16.collectives[0].bytes);
  EXPECT_LT(fp8.collectives[0].time_s, bf16.collectives[0].time_s);
  EXPECT_EQ(fp8.collectives[1].kind, CollectiveKind::kReduceScatter);
  EXPECT_EQ(fp8.collectives[1].bytes, bf16.collectives[1].bytes);
  EXPECT_DOUBLE_EQ(fp8.collectives[1].time_s, bf16.collectives[1].time_s);
}

// Llama 3 8B at 4096 tokens on 8 H100 as TP 4 x DP 2 with sequence parallelism: the TP
// overlap tests' plan.
Scenario tp4_llama8b() {
  Scenario s = llama8b("H100-SXM", 8);
  s.model.seq_length = 4096;
  return s;
}
Plan tp4_sp_plan() {
  Plan p;
  p.tp = 4;
  p.dp = 2;
  p.sequence_parallel = true;
  return p;
}

// With TP communication overlap the projection's and fc2's input-gradient GEMMs take the
// output gradient chunk by chunk as the ring exchange gathers it: the same FLOPs in tp smaller
// GEMMs, each with its own wave quantization, so the backward takes longer. Without sequence
// parallelism there is no such overlap and nothing changes.
TEST(LayerCosts, TpOverlapChunksTheRingExchangeInputGradientGemms) {
  const Scenario s = tp4_llama8b();
  Plan p = tp4_sp_plan();
  const LayerCosts off = layer_costs(s, p);
  p.tp_comm_overlap = true;
  const LayerCosts on = layer_costs(s, p);
  EXPECT_DOUBLE_EQ(on.backward_flops, off.backward_flops);
  EXPECT_GT(on.backward_s, off.backward_s);
  EXPECT_GT(on.forward_s, off.forward_s);
  p.sequence_parallel = false;
  const LayerCosts no_sp_on = layer_costs(s, p);
  p.tp_comm_overlap = false;
  EXPECT_DOUBLE_EQ(no_sp_on.backward_s, layer_costs(s, p).backward_s);
}

// Transformer Engine's pipelined reduce-scatters (after the projection and fc2) set an SM
// margin: those two forward GEMMs run on 132 - 16 of the H100's SMs. They are 35% of Llama 3
// 8B's forward GEMM FLOPs, so the forward grows by 16/116 of their time: more than 16/116 of a
// quarter of the forward GEMM time, less than 16/116 of all of it.
TEST(LayerCosts, TpOverlapPipelinedReduceScattersTakeSmsFromTheirGemms) {
  Scenario s = tp4_llama8b();
  Plan p = tp4_sp_plan();
  p.tp_comm_overlap = true;
  const ModelShape m = model_shape(s.model);
  cost_detail::Ctx c = cost_detail::make_ctx(s);
  ASSERT_TRUE(c.te_userbuffers);
  const cost_detail::LayerCompute with = cost_detail::layer_compute(c, m, p);
  c.te_userbuffers = false;
  const cost_detail::LayerCompute without = cost_detail::layer_compute(c, m, p);
  const double delta = with.fwd.s - without.fwd.s;
  EXPECT_GT(delta, 16.0 / 116.0 * 0.25 * without.gemm_fwd_s);
  EXPECT_LT(delta, 16.0 / 116.0 * without.gemm_fwd_s);
  EXPECT_DOUBLE_EQ(with.bwd.s, without.bwd.s);
  s.training.framework = Framework::kTorchtitan;
  EXPECT_FALSE(cost_detail::make_ctx(s).te_userbuffers);
}

// Under TP communication overlap each collective runs beside the one GEMM it feeds or drains,
// so a gather longer than its GEMM shows even where the layer's GEMMs together outlast all of
// the layer's collectives. Llama 3 8B in fp8 at TP 8 on H100: the projection (4096 / 8
// inputs) is shorter than its 16-bit reduce-scatter.
TEST(LayerCosts, OverlappedTpCollectivesHideOnlyBehindTheirOwnGemms) {
  Scenario s = tp4_llama8b();
  s.training.precision = Precision::kFp8;
  Plan p = tp4_sp_plan();
  p.tp = 8;
  p.dp = 1;
  p.tp_comm_overlap = true;
  const cost_detail::LayerCompute lc = cost_detail::layer_compute(cost_detail::make_ctx(s), model_shape(s.model), p);
  const LayerCosts on = layer_costs(s, p);
  auto time_of = [&on](CollectiveKind kind) {
    for (const LayerCosts::Collective& col : on.collectives)
      if (col.group == GroupKind::kTp && col.kind == kind) return col.time_s;
    return 0.0;
  };
  const double ag_s = time_of(CollectiveKind::kAllGather), rs_s = time_of(CollectiveKind::kReduceScatter);
  ASSERT_GT(rs_s, lc.tp_gemm_fwd_s[1]);
  // What no GEMM can hide in the forward: the QKV gather's and the projection scatter's excess.
  const double unhidden_fwd_s = std::max(0.0, ag_s - cost_detail::kOverlapEfficiency * lc.tp_gemm_fwd_s[0]) +
                                std::max(0.0, rs_s - cost_detail::kOverlapEfficiency * lc.tp_gemm_fwd_s[1]);
  ASSERT_GT(unhidden_fwd_s, 0);
  ASSERT_LT(on.tp_total_s, cost_detail::kOverlapEfficiency * (lc.gemm_fwd_s + lc.gemm_bwd_s));  // a layer-wide window would hide all
  EXPECT_GT(on.tp_exposed_s, unhidden_fwd_s);
  EXPECT_LT(on.tp_exposed_s, on.tp_total_s);
  // On a fast enough link every collective fits beside its GEMM: what remains is the share of
  // the H100's 132 SMs its kernels hold (4.5, the userbuffers configs' mean).
  s.cluster.intra_node.bandwidth_GBps = 100000;
  const LayerCosts fast = layer_costs(s, p);
  EXPECT_NEAR(fast.tp_exposed_s, fast.tp_total_s * 4.5 / 132.0, 1e-3 * fast.tp_total_s);
}

// torch's async TP fuses a reduce-scatter only with the matmul that produces its input, and
// torchtitan's block input gradient sums the input gradients of its separate wq, wk, wv (w1,
// w3) linears, so those two backward reduce-scatters per layer stay exposed in full. On a link
// fast enough for every collective to fit beside its GEMM, Megatron (userbuffers) pays only the
// SM share of all of them; torchtitan pays the two reduce-scatters on top of the share of the
// rest.
TEST(LayerCosts, TorchtitanAsyncTpLeavesTheInputGradientReduceScattersExposed) {
  Scenario s = tp4_llama8b();
  s.cluster.intra_node.bandwidth_GBps = 100000;
  Plan p = tp4_sp_plan();
  p.tp_comm_overlap = true;
  const LayerCosts megatron = layer_costs(s, p);
  EXPECT_NEAR(megatron.tp_exposed_s, megatron.tp_total_s * 4.5 / 132.0, 1e-3 * megatron.tp_total_s);
  s.training.framework = Framework::kTorchtitan;
  s.training.compile = true;
  const LayerCosts tt = layer_costs(s, p);
  double rs_s = 0;
  int32_t rs_backward = 0;
  for (const LayerCosts::Collective& col : tt.collectives)
    if (col.group == GroupKind::kTp && col.kind == CollectiveKind::kReduceScatter) {
      rs_s = col.time_s;
      rs_backward = col.backward_count;
    }
  ASSERT_EQ(rs_backward, 2);
  const double exposed_rs_s = 2.0 * rs_s;
  EXPECT_NEAR(tt.tp_exposed_s, exposed_rs_s + (tt.tp_total_s - exposed_rs_s) * 4.5 / 132.0, 1e-3 * tt.tp_total_s);
}

// Where the backward gets the gathered block inputs its weight gradients need
// (tp_gathered_input): Megatron gathers its saved shard again in every backward; torchtitan's
// autograd keeps the gathered tensor (without recompute, and under full recompute the
// recomputed forward's), except under its op-level selective recompute, which does not save
// the all-gather's output and gathers again in the recomputation, exposed without async TP.
// Without recompute torchtitan's saved QKV and fc1 inputs are then whole, not 1/tp.
TEST(LayerCosts, TorchtitanGathersTheBlockInputsAgainOnlyInItsOpLevelRecompute) {
  Scenario s = tp4_llama8b();
  Plan p = tp4_sp_plan();
  auto gathers = [&](Recompute r) {
    p.recompute = r;
    for (const LayerCosts::Collective& col : layer_costs(s, p).collectives)
      if (col.group == GroupKind::kTp && col.kind == CollectiveKind::kAllGather)
        return std::vector<int32_t>{col.forward_count, col.backward_count, col.recompute_count};
    return std::vector<int32_t>{};
  };
  EXPECT_EQ(gathers(Recompute::kNone), (std::vector<int32_t>{2, 4, 0}));
  EXPECT_EQ(gathers(Recompute::kSelective), (std::vector<int32_t>{2, 4, 0}));
  EXPECT_EQ(gathers(Recompute::kFull), (std::vector<int32_t>{2, 4, 2}));
  s.training.framework = Framework::kTorchtitan;
  EXPECT_EQ(gathers(Recompute::kNone), (std::vector<int32_t>{2, 2, 0}));
  EXPECT_EQ(gathers(Recompute::kFull), (std::vector<int32_t>{2, 2, 2}));
  EXPECT_EQ(gathers(Recompute::kSelective), (std::vector<int32_t>{2, 2, 2}));

  const LayerCosts sel = layer_costs(s, p);  // selective, no overlap
  double ag_s = 0, rs_s = 0;
  for (const LayerCosts::Collective& col : sel.collectives)
    (col.kind == CollectiveKind::kAllGather ? ag_s : rs_s) = col.time_s;
  EXPECT_NEAR(sel.tp_exposed_s, 4 * (ag_s + rs_s) + 2 * ag_s, 1e-9);

  const ModelShape m = model_shape(s.model);
  const double T = 4096, h = 4096, e = 2;
  const double megatron_none = layer_activation_bytes(m, 1, 4, 1, true, Recompute::kNone, e);
  const double torchtitan_none = layer_activation_bytes(m, 1, 4, 1, true, Recompute::kNone, e, 0, 0, Framework::kTorchtitan);
  EXPECT_NEAR(torchtitan_none - megatron_none, 2 * e * T * h * (1 - 1.0 / 4), 1e-6 * megatron_none);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, 1, 4, 1, true, Recompute::kFull, e, 0, 0, Framework::kTorchtitan),
                   layer_activation_bytes(m, 1, 4, 1, true, Recompute::kFull, e));
}

// torchtitan's sequence-parallel collectives work on the sequence dim of [batch, seq, hidden]:
// each plain gather or scatter concatenates the whole T x h tensor once more (a read and a
// write), async TP's fused gathers copy the rank's shard twice and its fused scatters reduce the
// tp partial products (a read of T x h, a write of the shard). Everything else equal (the same
// context with Megatron's framework), the layer's passes move exactly those bytes more.
TEST(LayerCosts, TorchtitanSequenceParallelCollectivesCopyTheSequenceDim) {
  Scenario s = tp4_llama8b();
  s.training.framework = Framework::kTorchtitan;
  s.training.compile = true;
  Plan p = tp4_sp_plan();
  const ModelShape m = model_shape(s.model);
  const double e = 2, t = 4, Th = 4096.0 * 4096.0;  // micro-batch 1 of 4096 tokens, hidden 4096
  auto extra = [&](const Plan& plan) {
    const cost_detail::Ctx tt = cost_detail::make_ctx(s);
    cost_detail::Ctx megatron = tt;
    megatron.framework = Framework::kMegatron;
    const cost_detail::LayerCompute a = cost_detail::layer_compute(tt, m, plan);
    const cost_detail::LayerCompute b = cost_detail::layer_compute(megatron, m, plan);
    return std::vector<double>{a.fwd.bytes - b.fwd.bytes, a.bwd.bytes - b.bwd.bytes, a.recompute.bytes - b.recompute.bytes};
  };
  std::vector<double> plain = extra(p);
  EXPECT_NEAR(plain[0], 2 * (2 * e * Th + 2 * e * Th), 1.0);
  EXPECT_NEAR(plain[1], 2 * (2 * e * Th + 2 * e * Th), 1.0);
  EXPECT_NEAR(plain[2], 0, 1.0);
  p.recompute = Recompute::kSelective;
  EXPECT_NEAR(extra(p)[2], 2 * (2 * e * Th), 1.0);  // the block inputs gathered again
  p.recompute = Recompute::kNone;
  p.tp_comm_overlap = true;
  std::vector<double> fused = extra(p);
  EXPECT_NEAR(fused[0], 2 * (4 * e * Th / t + e * Th * (1 + 1 / t)), 1.0);
  EXPECT_NEAR(fused[1], 2 * (4 * e * Th / t + 2 * e * Th), 1.0);
  p.sequence_parallel = false;
  p.tp_comm_overlap = false;
  EXPECT_NEAR(extra(p)[0], 0, 1.0);
}

// torchtitan's separate wq, wk, wv (w1, w3) read their common input once each, but cast it to
// fp8 once: torch.compile merges the identical casts of the Float8Linears, and torchao's float8
// TP casts the rank's shard before the sequence-parallel gather. Eager without TP each linear
// casts its own (2 + 1 + 1 bytes per element: read, write, transposed copy). Against the same
// layer with fused QKV and fc1, the forward moves the two extra reads of the QKV input and the
// extra read of the fc1 input, plus only the casts that are not shared.
TEST(LayerCosts, TorchtitanFloat8CastsEachBlockInputOnce) {
  Scenario s = tp4_llama8b();
  s.training.framework = Framework::kTorchtitan;
  s.training.precision = Precision::kFp8;
  s.training.compile = true;
  const ModelShape m = model_shape(s.model);
  const double Th = 4096.0 * 4096.0;  // micro-batch 1 of 4096 tokens, hidden 4096
  auto separate_minus_fused = [&](const Plan& plan, bool eager) {
    cost_detail::Ctx separate = cost_detail::make_ctx(s);
    separate.eager_block = eager;
    cost_detail::Ctx fused = separate;
    fused.separate_projections = false;
    return cost_detail::layer_compute(separate, m, plan).fwd.bytes - cost_detail::layer_compute(fused, m, plan).fwd.bytes;
  };
  Plan one;
  one.dp = 8;
  const double extra_reads = 3.0 * Th;  // fp8 elements, 1 byte
  // A cast under torchao's per-tensor scaling: 4 bytes per element and the amax pass's read of
  // the 16-bit input, 2 more.
  ASSERT_EQ(fp8_recipe(s.training), Fp8Recipe::kTensorwise);
  const double cast = 4.0 + 2.0, shard_cast = 3.0 + 2.0;  // the shard's cast leaves the transpose to the gathered copy
  EXPECT_NEAR(separate_minus_fused(one, false), extra_reads, 1.0);
  EXPECT_NEAR(separate_minus_fused(one, true), extra_reads + 3.0 * cast * Th, 1.0);
  Plan tp = tp4_sp_plan();  // float8 TP: the shard is cast, its gathered copy transposed
  EXPECT_NEAR(separate_minus_fused(tp, false), extra_reads - 2.0 * shard_cast * (Th - Th / 4.0), 1.0);
  EXPECT_NEAR(separate_minus_fused(tp, true), extra_reads - 2.0 * shard_cast * (Th - Th / 4.0), 1.0);
}

// Megatron-LM's own layers (the materialized-attention stack) add the QKV bias in its own
// kernel, reduce each bias gradient separately and concatenate the q, k, v gradients. Bytes
// per micro-batch follow the shapes exactly; a model without biases (Llama) keeps only the
// concatenation.
TEST(LayerCosts, MegatronLocalLayersRunTheBiasAndCopyKernelsThatTransformerEngineFuses) {
  Scenario s = gpt175b(64);
  s.model.num_layers = 24;
  s.model.hidden_size = 2048;
  s.model.num_attention_heads = 16;
  s.model.attention_kernel = AttentionKernel::kMaterialized;
  Plan p;
  p.tp = 2;
  p.micro_batch_size = 2;
  const cost_detail::Ctx c = cost_detail::make_ctx(s);
  const ModelShape m = model_shape(s.model);
  const double T = 2.0 * 2048, h = 2048, qkv = 3 * h / 2, e = 2;
  cost_detail::LayerCompute gpt;
  cost_detail::add_megatron_local_layer_kernels(c, m, p, T, gpt);
  EXPECT_DOUBLE_EQ(gpt.fwd.bytes, 2 * e * T * qkv);                                  // QKV bias add
  EXPECT_DOUBLE_EQ(gpt.bwd.bytes, 2 * e * T * qkv + e * T * (qkv + 4 * h / 2) + 2 * e * T * h);
  EXPECT_EQ(gpt.fwd.flops, 0);
  p.sequence_parallel = true;  // the projection and fc2 bias gradients cover the local shard
  cost_detail::LayerCompute sp;
  cost_detail::add_megatron_local_layer_kernels(c, m, p, T, sp);
  EXPECT_DOUBLE_EQ(gpt.bwd.bytes - sp.bwd.bytes, 2 * e * (T - T / 2) * h);
  p.sequence_parallel = false;

  Scenario l = llama8b("A100-80GB", 8);
  l.model.attention_kernel = AttentionKernel::kMaterialized;
  const ModelShape lm = model_shape(l.model);
  cost_detail::LayerCompute llama;
  cost_detail::add_megatron_local_layer_kernels(cost_detail::make_ctx(l), lm, p, T, llama);
  EXPECT_EQ(llama.fwd.bytes, 0);
  EXPECT_DOUBLE_EQ(llama.bwd.bytes, 2 * e * T * (4096 + 2 * 1024) / 2);
}

// ZeRO-3 / FSDP gathers and reduce-scatters module by module, each call its own NCCL ring:
// FSDP2 (torchtitan) and Megatron's FSDP one per transformer layer plus the root module,
// DeepSpeed one gather per submodule with partitioned parameters (the 4 linears of a GPT layer:
// its LayerNorms and biases are under the persistence threshold and stay whole) and reduce
// buckets of 5e8 elements. Over 1536 ranks every call pays ~3.6 ms of ring latency, so
// DeepSpeed's 770 gathers per step (without full recompute) cost more per byte than FSDP2's 194.
// With full recompute DeepSpeed's submodule hooks gather once more inside the backward (1155),
// FSDP2 not.
TEST(Iteration, Zero3CollectivesArePerModuleAndPayTheirLatency) {
  Scenario s = gpt175b(1536);
  s.training.global_batch_size = 1536;
  Plan p;
  p.dp = 1536;
  p.zero_stage = 3;
  p.micro_batch_size = 1;
  p.recompute = Recompute::kFull;
  auto gathers = [](const BackendResult& r) {
    const CommEntry* c = find_comm(r.communication, CollectiveKind::kAllGather, GroupKind::kDp);
    return c ? *c : CommEntry{};
  };
  s.training.framework = Framework::kTorchtitan;
  const BackendResult fsdp2 = estimate_plan(s, p);
  s.training.framework = Framework::kDeepspeed;
  const BackendResult ds = estimate_plan(s, p);
  EXPECT_EQ(gathers(fsdp2).count, 2 * (96 + 1));  // forward and backward, one micro-batch
  EXPECT_EQ(gathers(ds).count, 3 * (96 * 4 + 1));  // and the recompute's forward
  // The same parameters, cut finer, and gathered a third time.
  EXPECT_NEAR(1.5 * static_cast<double>(gathers(fsdp2).bytes), static_cast<double>(gathers(ds).bytes), 1e-6 * static_cast<double>(gathers(ds).bytes));
  const GroupSpan g = group_span(GroupKind::kDpCp, p, s.cluster.gpus_per_node);
  const double latency_s = collective_time_s(CollectiveKind::kAllGather, 1, g, s.cluster);
  EXPECT_GT(latency_s, 3e-3);
  // The finer calls pay more latency per byte gathered.
  EXPECT_GT(gathers(ds).time_s / static_cast<double>(gathers(ds).bytes),
            gathers(fsdp2).time_s / static_cast<double>(gathers(fsdp2).bytes));
  // Selective recompute keeps the submodules' forward out of the backward: two passes. The
  // gathers carry the same bf16 weights (the gradients differ: DeepSpeed reduces them in bf16,
  // FSDP2 in fp32), so the extra gather calls' latency shows in the gathers alone.
  p.recompute = Recompute::kSelective;
  const BackendResult ds_selective = estimate_plan(s, p);
  s.training.framework = Framework::kTorchtitan;
  const BackendResult fsdp2_selective = estimate_plan(s, p);
  EXPECT_EQ(gathers(ds_selective).count, 2 * (96 * 4 + 1));
  EXPECT_EQ(gathers(fsdp2_selective).count, 2 * (96 + 1));
  EXPECT_GT(gathers(ds_selective).time_s - gathers(fsdp2_selective).time_s, 0.9 * 2 * (96 * 4 - 96) * latency_s);
}

// DeepSpeed never partitions a parameter of at most stage3_param_persistence_threshold (1e5)
// elements, so a submodule whose weight on a rank is that small is not gathered. GPT with hidden
// 256 (ffn 1024): QKV 196,608, fc1 and fc2 262,144 elements gathered; the projection's 65,536
// and the LayerNorms' 256 stay whole. At TP 2 only fc1 and fc2 remain above the threshold.
TEST(Iteration, DeepspeedZeroThreeKeepsParametersUnderThePersistenceThresholdWhole) {
  Scenario s = gpt175b(64);
  s.model.num_layers = 8;
  s.model.hidden_size = 256;
  s.model.num_attention_heads = 4;
  s.training.global_batch_size = 64;
  s.training.framework = Framework::kDeepspeed;
  Plan p;
  p.dp = 64;
  p.zero_stage = 3;
  p.micro_batch_size = 1;
  auto gathers = [&](const Plan& plan) {
    const BackendResult r = estimate_plan(s, plan);
    const CommEntry* c = find_comm(r.communication, CollectiveKind::kAllGather, GroupKind::kDp);
    return c ? c->count : 0;
  };
  EXPECT_EQ(gathers(p), 2 * (8 * 3 + 1));  // forward and backward, one micro-batch
  p.dp = 32;
  p.tp = 2;
  EXPECT_EQ(gathers(p), 2 * 2 * (8 * 2 + 1));  // two micro-batches now
  // An MoE layer's MLP linears are one expert's: hidden 512 with 128-wide experts leaves
  // fc1 and fc2 at 65,536 elements, whole on every rank, where the dense FFN (2048) is gathered.
  s.model.hidden_size = 512;
  s.model.num_attention_heads = 8;
  p.dp = 64;
  p.tp = 1;
  EXPECT_EQ(gathers(p), 2 * (8 * 4 + 1));
  s.model.num_experts = 8;
  s.model.moe_top_k = 2;
  s.model.moe_ffn_hidden_size = 128;
  EXPECT_EQ(gathers(p), 2 * (8 * 2 + 1));
}

// DeepSpeed's sharded optimizers gather the updated weights inside their step: ZeRO-1's gather
// stays exposed where Megatron's distributed optimizer hides it behind the next forward
// (overlap_param_gather), and bf16 training without ZeRO (BF16_Optimizer) all-reduces the
// gradients and then gathers the same weights. GPT 175B cut to 8 layers on 64 A100, DP 64.
TEST(Iteration, DeepspeedGathersTheUpdatedWeightsInItsStep) {
  Scenario s = gpt175b(64);
  s.model.num_layers = 8;
  Plan p;
  p.dp = 64;
  p.zero_stage = 1;
  p.micro_batch_size = 1;
  p.overlap_param_gather = true;
  const BackendResult megatron = estimate_plan(s, p);
  s.training.framework = Framework::kDeepspeed;
  const BackendResult ds1 = estimate_plan(s, p);
  const CommEntry* ag = find_comm(ds1.communication, CollectiveKind::kAllGather, GroupKind::kDp);
  ASSERT_NE(ag, nullptr);
  EXPECT_GE(ds1.time_breakdown_s.exposed_comm, ag->time_s);
  // Megatron hides the gather behind the next forward (all but what the short forward of 8
  // layers cannot hide, and the SMs it holds).
  EXPECT_GT(ds1.time_breakdown_s.exposed_comm - megatron.time_breakdown_s.exposed_comm, 0.25 * ag->time_s);
  p.zero_stage = 0;
  const BackendResult ds0 = estimate_plan(s, p);
  const CommEntry* ag0 = find_comm(ds0.communication, CollectiveKind::kAllGather, GroupKind::kDp);
  ASSERT_NE(ag0, nullptr);
  EXPECT_EQ(ag0->bytes, ag->bytes);
  EXPECT_NE(find_comm(ds0.communication, CollectiveKind::kAllReduce, GroupKind::kDp), nullptr);
  s.training.precision = Precision::kFp16;  // FP16_Optimizer: every rank keeps every state
  EXPECT_EQ(find_comm(estimate_plan(s, p).communication, CollectiveKind::kAllGather, GroupKind::kDp), nullptr);
}

// torchtitan's ZeRO-2 (FSDP2, reshard_after_forward=False) keeps a block gathered from its
// forward to its backward but reshards it after the backward, and its accumulation loop keeps
// nothing across micro-batches: one all-gather per block and micro-batch, none in the backward,
// and a reduce-scatter per block and micro-batch. Megatron's and DeepSpeed's ZeRO-2 gather the
// stage once per step.
TEST(Iteration, TorchtitanZero2GathersEveryMicroBatchOnlyBeforeTheForward) {
  auto [s, p] = llama8b_data_parallel_8_micro_batches(2);
  auto count = [](const BackendResult& r, CollectiveKind k) {
    const CommEntry* c = find_comm(r.communication, k, GroupKind::kDp);
    return c ? c->count : 0;
  };
  s.training.framework = Framework::kTorchtitan;
  const BackendResult fsdp2_zero2 = estimate_plan(s, p);
  p.zero_stage = 3;
  const BackendResult fsdp2_zero3 = estimate_plan(s, p);
  s.training.framework = Framework::kMegatron;
  p.zero_stage = 2;
  const BackendResult megatron_zero2 = estimate_plan(s, p);
  const int64_t blocks = 32 + 1;  // the transformer blocks and the root module
  EXPECT_EQ(count(fsdp2_zero2, CollectiveKind::kAllGather), 8 * blocks);
  EXPECT_EQ(count(fsdp2_zero3, CollectiveKind::kAllGather), 2 * 8 * blocks);
  EXPECT_EQ(count(fsdp2_zero2, CollectiveKind::kReduceScatter), 8 * blocks);
  EXPECT_EQ(count(megatron_zero2, CollectiveKind::kAllGather), 1);
  EXPECT_EQ(count(megatron_zero2, CollectiveKind::kReduceScatter), 8);
  EXPECT_LT(fsdp2_zero2.time_breakdown_s.dp_comm, fsdp2_zero3.time_breakdown_s.dp_comm);
  EXPECT_TRUE(gathers_every_micro_batch(Framework::kTorchtitan, 2));
  EXPECT_FALSE(gathers_every_micro_batch(Framework::kDeepspeed, 2));
  EXPECT_EQ(backward_gather_passes(Framework::kTorchtitan, Recompute::kFull, 2), 0);
  EXPECT_EQ(backward_gather_passes(Framework::kDeepspeed, Recompute::kFull, 3), 2);
}

TEST(Iteration, QuickEstimateAgreesWithTheFullResult) {
  Scenario s = gpt175b(64);
  Plan p;
  p.tp = 8;
  p.pp = 8;
  p.vpp = 3;
  p.schedule = Schedule::kInterleaved;
  p.sequence_parallel = true;
  p.recompute = Recompute::kSelective;
  const QuickEstimate q = quick_estimate(s, p);
  const BackendResult r = estimate_plan(s, p);
  EXPECT_TRUE(q.fits) << q.reject_reason;
  EXPECT_DOUBLE_EQ(q.iteration_time_s, r.iteration_time_s);
  EXPECT_DOUBLE_EQ(q.peak_memory_gib, r.memory.peak_gib);
}

TEST(Iteration, BubbleShrinksWithInterleavingAndMoreMicroBatches) {
  Scenario s = gpt175b(64);
  Plan p;
  p.tp = 8;
  p.pp = 8;
  p.sequence_parallel = true;
  p.recompute = Recompute::kSelective;
  const BackendResult one = estimate_plan(s, p);
  // 1F1B: the last stage (with the output layer) paces the 64 micro-batches; the bubble is the
  // fill and drain through the 7 other stages, each lighter by the output layer (the 96 layers
  // split 12 per stage): 1 - 5% of the last stage's time each.
  const double last_stage_s = (one.time_breakdown_s.compute + one.time_breakdown_s.exposed_comm) / 64;
  EXPECT_LT(one.time_breakdown_s.bubble / 7.0, last_stage_s);
  EXPECT_GT(one.time_breakdown_s.bubble / 7.0, 0.95 * last_stage_s);
  p.vpp = 2;
  p.schedule = Schedule::kInterleaved;
  const BackendResult two = estimate_plan(s, p);
  // Two chunks per stage: the fill passes half the layers (plus the cool-down's wait for the
  // output chunk's backward).
  EXPECT_GT(two.time_breakdown_s.bubble, 0.5 * one.time_breakdown_s.bubble);
  EXPECT_LT(two.time_breakdown_s.bubble, 0.56 * one.time_breakdown_s.bubble);
  EXPECT_LT(two.iteration_time_s, one.iteration_time_s);
}

TEST(Iteration, PipelineMessagesCostWhatTheirHopsCost) {
  // dp 4 x pp 4 on two 8-GPU nodes: stages 0 and 1 share node 0, stages 2 and 3 node 1. A
  // middle stage sends one activation over the NIC and one gradient over NVLink per micro-batch
  // (stage 1: to 2 and to 0), an end stage one NVLink message (stage 0: to 1; stage 3: to 2).
  Scenario s = llama8b("H100-SXM", 16);
  s.training.global_batch_size = 64;  // 16 micro-batches of 1 per pipeline
  Plan p;
  p.dp = 4;
  p.pp = 4;
  p.micro_batch_size = 1;
  const BackendResult r = estimate_plan(s, p);
  ASSERT_GT(r.iteration_time_s, 0);
  const int64_t bytes = layer_costs(s, p).pp_message_bytes;
  const double nic_s = p2p_time_s(bytes, true, s.cluster), nvlink_s = p2p_time_s(bytes, false, s.cluster);
  ASSERT_LT(4.0 * nvlink_s, nic_s);
  const double per_mb = r.time_breakdown_s.pp_comm / 16.0;
  const bool end_stage_paces = std::abs(per_mb - nvlink_s) < 1e-9;
  const bool middle_stage_paces = std::abs(per_mb - (nic_s + nvlink_s)) < 1e-9;
  EXPECT_TRUE(end_stage_paces || middle_stage_paces) << per_mb;
  EXPECT_LT(per_mb, 2.0 * nic_s);  // not every hop is a NIC message
}

TEST(Iteration, PhysicalOrderings) {
  // More recompute costs time.
  Scenario s = gpt175b(64);
  Plan p;
  p.tp = 8;
  p.pp = 8;
  p.sequence_parallel = true;
  double prev = 0;
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    p.recompute = r;
    const double t = quick_estimate(s, p).iteration_time_s;
    EXPECT_GT(t, prev);
    prev = t;
  }
  // Tensor parallelism across nodes is slower than inside one.
  Scenario big = gpt175b(128);
  Plan inside;
  inside.tp = 8;
  inside.pp = 8;
  inside.dp = 2;
  Plan across = inside;
  across.tp = 16;
  across.dp = 1;
  EXPECT_GT(layer_costs(big, across).tp_total_s, layer_costs(big, inside).tp_total_s);
  // fp8 is faster than bf16 on H100.
  Plan dp8;
  dp8.dp = 8;
  dp8.zero_stage = 1;
  EXPECT_LT(quick_estimate(llama8b("H100-SXM", 8, Precision::kFp8), dp8).iteration_time_s,
            0.85 * quick_estimate(llama8b("H100-SXM", 8), dp8).iteration_time_s);
  // H100 is faster than A100, B200 faster than H100.
  EXPECT_LT(quick_estimate(llama8b("H100-SXM", 8), dp8).iteration_time_s,
            0.5 * quick_estimate(llama8b("A100-80GB", 8), dp8).iteration_time_s);
  EXPECT_LT(quick_estimate(llama8b("B200", 8), dp8).iteration_time_s,
            quick_estimate(llama8b("H100-SXM", 8), dp8).iteration_time_s);
}

// Overlap hides the data-parallel reduction but Megatron's last bucket (the embedding's: 6.5%
// of Llama 3 8B's parameters, see MegatronsLastGradientBucketIsExposed).
// Compute beside a collective that holds a share of the SMs: late by the share of the
// collective's time when the collective ends first, else running at 1 - share throughout.
TEST(Iteration, ComputeBesideACollectiveEndsLateByTheSharesItHolds) {
  EXPECT_DOUBLE_EQ(compute_end_beside_s(10.0, 4.0, 0.25), 11.0);
  EXPECT_DOUBLE_EQ(compute_end_beside_s(1.0, 10.0, 0.25), 1.0 / 0.75);
  EXPECT_DOUBLE_EQ(compute_end_beside_s(3.0, 4.0, 0.25), 4.0);  // both end together
  EXPECT_DOUBLE_EQ(compute_end_beside_s(3.0, 4.0, 0.0), 3.0);
  EXPECT_DOUBLE_EQ(compute_end_beside_s(3.0, 0.0, 0.25), 3.0);
}

TEST(Iteration, OverlapHidesDataParallelCommunication) {
  Scenario s = llama8b("H100-SXM", 64);
  s.training.global_batch_size = 512;
  Plan p;
  p.dp = 64;
  p.zero_stage = 1;
  const BackendResult hidden = estimate_plan(s, p);
  p.overlap_grad_reduce = false;
  p.overlap_param_gather = false;
  const BackendResult exposed = estimate_plan(s, p);
  EXPECT_GT(hidden.time_breakdown_s.dp_comm, 0);
  EXPECT_NEAR(hidden.time_breakdown_s.dp_comm, exposed.time_breakdown_s.dp_comm, 1e-12);
  // Hiding saves the collectives' time but the share of the SMs they hold while they run.
  const double share = nccl_overlap_sm_share(s.cluster.gpu);
  EXPECT_GT(exposed.time_breakdown_s.exposed_comm,
            hidden.time_breakdown_s.exposed_comm + (0.85 - share) * exposed.time_breakdown_s.dp_comm);
  EXPECT_GT(exposed.iteration_time_s, hidden.iteration_time_s);
}

// A hidden reduce-scatter still holds SMs while it runs: it costs its kNcclOverlapSms share of
// the GPU, so ZeRO-2's reduce-scatter per micro-batch costs more than ZeRO-1's one per step even
// when every one of them hides behind the backward.
TEST(Iteration, HiddenDataParallelCollectivesCostTheSmsTheyHold) {
  auto [s, p] = llama8b_data_parallel_8_micro_batches(1);
  const BackendResult zero1 = estimate_plan(s, p);
  p.zero_stage = 2;
  const BackendResult zero2 = estimate_plan(s, p);
  const CommEntry* rs1 = find_comm(zero1.communication, CollectiveKind::kReduceScatter, GroupKind::kDp);
  const CommEntry* rs2 = find_comm(zero2.communication, CollectiveKind::kReduceScatter, GroupKind::kDp);
  ASSERT_NE(rs1, nullptr);
  ASSERT_NE(rs2, nullptr);
  EXPECT_EQ(rs2->count, 8 * rs1->count);
  EXPECT_GT(zero1.time_breakdown_s.exposed_comm, 0);
  // Each reduce-scatter adds its SM share: 24 of the H100's 132 SMs.
  EXPECT_DOUBLE_EQ(nccl_overlap_sm_share(s.cluster.gpu), 24.0 / 132.0);
  EXPECT_NEAR(zero2.time_breakdown_s.exposed_comm - zero1.time_breakdown_s.exposed_comm, 7.0 * rs1->time_s * 24.0 / 132.0,
              1e-6);
  EXPECT_GT(zero2.iteration_time_s, zero1.iteration_time_s);
}

// Each framework reduces gradients in its own default precision: Megatron fp32 for bf16 (forced)
// but fp16 for fp16, DeepSpeed the training dtype, torchtitan fp32.
TEST(Iteration, GradientReductionFollowsTheFrameworksPrecision) {
  TrainingConfig t;
  auto dtype = [&](Framework f, Precision p) {
    t.framework = f;
    t.precision = p;
    return grad_reduce_dtype(t);
  };
  EXPECT_EQ(dtype(Framework::kMegatron, Precision::kBf16), DType::kFp32);
  EXPECT_EQ(dtype(Framework::kMegatron, Precision::kFp8), DType::kFp32);
  EXPECT_EQ(dtype(Framework::kMegatron, Precision::kFp16), DType::kFp16);
  EXPECT_EQ(dtype(Framework::kDeepspeed, Precision::kBf16), DType::kBf16);
  EXPECT_EQ(dtype(Framework::kDeepspeed, Precision::kFp16), DType::kFp16);
  EXPECT_EQ(dtype(Framework::kTorchtitan, Precision::kBf16), DType::kFp32);
  for (Framework f : {Framework::kMegatron, Framework::kDeepspeed, Framework::kTorchtitan})
    EXPECT_EQ(dtype(f, Precision::kFp32), DType::kFp32);
  EXPECT_EQ(grad_reduce_bytes_per_param(t), 4.0);
  t.precision = Precision::kBf16;
  t.framework = Framework::kDeepspeed;
  EXPECT_EQ(grad_reduce_bytes_per_param(t), 2.0);

  // The gradient reduce-scatter of a Megatron fp16 run carries half the bytes of its bf16 twin.
  Scenario s = llama8b("H100-SXM", 64);
  s.training.global_batch_size = 512;
  Plan p;
  p.dp = 64;
  p.zero_stage = 1;
  auto dp_bytes = [&](Precision prec) {
    s.training.precision = prec;
    const BackendResult r = estimate_plan(s, p);
    const CommEntry* c = find_comm(r.communication, CollectiveKind::kReduceScatter, GroupKind::kDp);
    return c ? static_cast<double>(c->bytes) : 0.0;
  };
  const double bf16 = dp_bytes(Precision::kBf16), fp16 = dp_bytes(Precision::kFp16);
  EXPECT_GT(bf16, 0);
  EXPECT_NEAR(fp16, bf16 / 2, 1e-6 * bf16);

  // training.grad_reduce_in_fp32 false (Megatron-LM --grad-reduce-in-bf16, NVIDIA's benchmark
  // recipes): the bf16 run's reduce-scatter carries 2 bytes per parameter, and its main_grad
  // buffer shrinks by the same 2 bytes; a stated true keeps fp32 under DeepSpeed too.
  const BackendResult fp32_grads = [&] {
    s.training.precision = Precision::kBf16;
    return estimate_plan(s, p);
  }();
  s.training.grad_reduce_in_fp32 = false;
  EXPECT_NEAR(dp_bytes(Precision::kBf16), bf16 / 2, 1e-6 * bf16);
  const BackendResult bf16_grads = estimate_plan(s, p);
  const double params = static_cast<double>(parameter_counts(model_shape(s.model)).total);
  EXPECT_NEAR(gib_to_bytes(fp32_grads.memory.peak_gib - bf16_grads.memory.peak_gib), 2.0 * params,
              0.02 * 2.0 * params);
  t.framework = Framework::kDeepspeed;
  t.grad_reduce_in_fp32 = true;
  EXPECT_EQ(grad_reduce_dtype(t), DType::kFp32);
}

// Megatron's DDP: the bucket with the word embedding is reduced after the backward and gathered
// before the first layer, so neither hides, however long the step; the rest of the reduction
// hides and pays only its SMs. Llama 3 8B (untied, 128256 x 4096 = 525M-parameter embedding,
// more than a 64M-parameter bucket at dp 64) with 16 micro-batches per rank.
TEST(Iteration, MegatronsLastGradientBucketIsExposed) {
  Scenario s = llama8b("H100-SXM", 64);
  s.training.global_batch_size = 1024;
  Plan p;
  p.dp = 64;
  p.zero_stage = 1;
  p.micro_batch_size = 1;
  const BackendResult r = estimate_plan(s, p);
  const double embedding = 128256.0 * 4096.0;
  const GroupSpan span = group_span(GroupKind::kDpCp, p, s.cluster.gpus_per_node);
  const double tail = collective_time_s(CollectiveKind::kReduceScatter, static_cast<int64_t>(4.0 * embedding), span, s.cluster) +
                      collective_time_s(CollectiveKind::kAllGather, static_cast<int64_t>(2.0 * embedding), span, s.cluster);
  const double share = nccl_overlap_sm_share(s.cluster.gpu);
  EXPECT_GT(r.time_breakdown_s.exposed_comm, tail);
  EXPECT_LT(r.time_breakdown_s.exposed_comm, tail + (share + 0.04) * r.time_breakdown_s.dp_comm);
  // DeepSpeed's engine reduces through its own buckets, with no such tail: its reduction hides
  // whole and pays only its SMs; but it gathers all of the updated weights inside its optimizer
  // step.
  s.training.framework = Framework::kDeepspeed;
  const BackendResult ds = estimate_plan(s, p);
  const CommEntry* ag = find_comm(ds.communication, CollectiveKind::kAllGather, GroupKind::kDp);
  const CommEntry* rs = find_comm(ds.communication, CollectiveKind::kReduceScatter, GroupKind::kDp);
  ASSERT_NE(ag, nullptr);
  ASSERT_NE(rs, nullptr);
  EXPECT_GE(ds.time_breakdown_s.exposed_comm, ag->time_s);
  EXPECT_LE(ds.time_breakdown_s.exposed_comm - ag->time_s, share * rs->time_s * (1.0 + 1e-9));
}

TEST(Iteration, RejectsPlansThatDoNotFitOrCannotRun) {
  Scenario s = gpt175b(8);
  Plan p;
  p.tp = 8;
  QuickEstimate q = quick_estimate(s, p);
  EXPECT_FALSE(q.fits);
  EXPECT_NE(q.reject_reason.find("GiB per GPU"), std::string::npos) << q.reject_reason;
  EXPECT_NE(q.reject_reason.find("A100-80GB"), std::string::npos) << q.reject_reason;
  EXPECT_GT(q.peak_memory_gib, 80 * 18.0 / 8);  // 175B x 18 bytes / 8 GPUs alone is > 350 GiB
  Plan wrong;
  wrong.tp = 4;  // 4 GPUs of 8
  q = quick_estimate(s, wrong);
  EXPECT_FALSE(q.fits);
  EXPECT_EQ(q.iteration_time_s, 0);
  EXPECT_NE(q.reject_reason.find("8 GPUs"), std::string::npos) << q.reject_reason;
  wrong.tp = 8;
  wrong.ep = 2;
  EXPECT_FALSE(quick_estimate(s, wrong).reject_reason.empty());
  const BackendResult r = estimate_plan(s, wrong);
  EXPECT_FALSE(r.memory.fits);
  EXPECT_EQ(r.iteration_time_s, 0);
}

// The search asks for misfits' memory only: the same memory, fit and reason, no time. Plans that
// fit are estimated alike either way.
TEST(Iteration, SkipsTheTimeOfAMisfitOnlyWhenAsked) {
  const Scenario s = gpt175b(8);
  Plan misfit;
  misfit.tp = 8;
  const QuickEstimate timed = quick_estimate(s, misfit, MisfitTime::kEstimate);
  const QuickEstimate skipped = quick_estimate(s, misfit, MisfitTime::kSkip);
  ASSERT_FALSE(timed.fits);
  EXPECT_GT(timed.iteration_time_s, 0);
  EXPECT_EQ(skipped.iteration_time_s, 0);
  EXPECT_FALSE(skipped.fits);
  EXPECT_EQ(skipped.peak_memory_gib, timed.peak_memory_gib);
  EXPECT_EQ(skipped.reject_reason, timed.reject_reason);

  const Scenario small = gpt125m_a100();
  Plan fits;
  fits.dp = small.cluster.num_gpus;
  const QuickEstimate a = quick_estimate(small, fits, MisfitTime::kEstimate);
  const QuickEstimate b = quick_estimate(small, fits, MisfitTime::kSkip);
  ASSERT_TRUE(a.fits);
  EXPECT_EQ(a.iteration_time_s, b.iteration_time_s);
  EXPECT_EQ(a.peak_memory_gib, b.peak_memory_gib);
}

// Sizes in messages: one decimal, as printf's "%.1f" writes them.
TEST(Units, GibTextIsPrintfsOneDecimal) {
  for (double gib : {0.0, 0.04, 0.05, 0.15, 0.25, 1.0, 73.95, 74.0, 79.99, 80.0, 1234.5678, 1e12, -2.25}) {
    char expected[64];
    std::snprintf(expected, sizeof expected, "%.1f", gib);
    EXPECT_EQ(gib_text(gib), expected) << gib;
  }
  EXPECT_FALSE(gib_text(1e300).empty());  // too long for one decimal in the buffer: the shortest form
}

// Llama-8B-shaped mixture of experts on 64 H100 (Mixtral-like routing: top-2, seq 4096, batch 256).
Scenario moe_llama(int64_t experts, double capacity_factor = 1.0, int64_t gpus = 64) {
  Scenario s = llama8b("H100-SXM", gpus);
  s.model.vocab_size = 32000;
  s.model.seq_length = 4096;
  s.model.num_experts = experts;
  s.model.moe_top_k = 2;
  s.model.moe_capacity_factor = capacity_factor;
  s.training.global_batch_size = 256;
  return s;
}

TEST(Iteration, MixtureOfExpertsWithExpertParallelism) {
  Scenario s = moe_llama(8);
  Plan p;
  p.dp = 64;
  p.ep = 8;
  p.zero_stage = 1;
  const BackendResult r = estimate_plan(s, p);
  ASSERT_GT(r.iteration_time_s, 0);
  EXPECT_GT(r.time_breakdown_s.ep_comm, 0);
  EXPECT_NE(find_comm(r.communication, CollectiveKind::kAllToAll, GroupKind::kEp), nullptr);
  // Experts are sharded 8 ways: less memory than with ep = 1.
  Plan no_ep = p;
  no_ep.ep = 1;
  EXPECT_LT(r.memory.peak_gib, estimate_plan(s, no_ep).memory.peak_gib);
}

// A pipeline message that leaves the node shares the receiving GPU's NIC with that stage's
// expert all-to-all when the EP group spans nodes: it waits, on average, for the rest of the
// all-to-all it arrives in (at most half of one). pp 2 x dp 16 on 32 GPUs (each stage two
// 8-GPU nodes), 1F1B: each stage sends one NIC message per micro-batch.
TEST(Iteration, PipelineMessagesWaitForTheReceivingStagesAllToAllOnItsNics) {
  Scenario s = moe_llama(16, 1.0, 32);
  s.model.num_layers = 8;
  s.training.global_batch_size = 256;  // 16 micro-batches of 1 per pipeline
  Plan p;
  p.pp = 2;
  p.dp = 16;
  p.zero_stage = 1;
  p.micro_batch_size = 1;
  const double nic_s = p2p_time_s(layer_costs(s, p).pp_message_bytes, true, s.cluster);
  p.ep = 8;  // the all-to-all stays on NVLink: the message has the NIC to itself
  const BackendResult inside = estimate_plan(s, p);
  ASSERT_GT(inside.iteration_time_s, 0);
  EXPECT_NEAR(inside.time_breakdown_s.pp_comm / 16.0, nic_s, 1e-9);
  p.ep = 16;  // over both nodes of the stage
  const BackendResult across = estimate_plan(s, p);
  ASSERT_GT(across.iteration_time_s, 0);
  const CommEntry* a2a = find_comm(across.communication, CollectiveKind::kAllToAll, GroupKind::kEp);
  ASSERT_NE(a2a, nullptr);
  const double a2a_s = a2a->time_s / static_cast<double>(a2a->count);
  const double per_mb = across.time_breakdown_s.pp_comm / 16.0;
  EXPECT_GT(per_mb, nic_s + 0.05 * a2a_s);
  EXPECT_LE(per_mb, nic_s + 0.5 * a2a_s + 1e-12);
}

// The same wait for a context-parallel ring across nodes: Llama 3 8B at TP 8 x CP 2 x PP 2 on
// 32 GPUs, each CP pair on two nodes, so the ring's K / V hops and the pipeline's messages
// share the NICs; with CP inside a node (TP 4) the messages have them to themselves.
TEST(Iteration, PipelineMessagesWaitForTheReceivingStagesContextParallelRing) {
  Scenario s = llama8b("H100-SXM", 32);
  s.training.global_batch_size = 32;  // 16 micro-batches of 1 per pipeline
  Plan p;
  p.tp = 8;
  p.cp = 2;
  p.pp = 2;
  p.dp = 1;
  p.micro_batch_size = 1;
  p.sequence_parallel = true;
  const double per_mb_across = estimate_plan(s, p).time_breakdown_s.pp_comm / 16.0;
  const double nic_across = p2p_time_s(layer_costs(s, p).pp_message_bytes, true, s.cluster);
  EXPECT_GT(per_mb_across, nic_across * 1.01);
  p.tp = 4;
  p.dp = 2;
  const double per_mb_inside = estimate_plan(s, p).time_breakdown_s.pp_comm / 16.0;
  const bool crosses = pp_hop_crosses_nodes(p, s.cluster.gpus_per_node, 0, 1);
  EXPECT_NEAR(per_mb_inside, p2p_time_s(layer_costs(s, p).pp_message_bytes, crosses, s.cluster), 1e-12);
}

// Expert capacity (Megatron get_capacity with tokens x top_k) and the all-to-all send buffer:
// E x capacity x h x bytes, so a capacity factor of 2 doubles it and an uneven split rounds up.
TEST(Iteration, MixtureOfExpertsAllToAllMovesThePaddedCapacity) {
  EXPECT_EQ(moe_expert_capacity(64, 4, 2, 1.0), 32);
  EXPECT_EQ(moe_expert_capacity(10, 4, 1, 1.25), 4);  // ceil(3.125)
  EXPECT_EQ(moe_expert_capacity(3, 8, 1, 1.0), 1);    // at least one slot
  Scenario s = llama8b("H100-SXM", 8);
  s.model.num_layers = 4;
  s.model.seq_length = 2048;
  s.model.num_experts = 8;
  s.model.moe_top_k = 2;
  s.training.global_batch_size = 8;
  Plan p;
  p.dp = 8;
  p.ep = 8;
  auto a2a_bytes = [&](double cf) {
    s.model.moe_capacity_factor = cf;
    const BackendResult r = estimate_plan(s, p);
    const CommEntry* c = find_comm(r.communication, CollectiveKind::kAllToAll, GroupKind::kEp);
    return c ? c->bytes : int64_t{-1};
  };
  const int64_t T = s.model.seq_length;  // micro-batch 1
  const int64_t per_call = 8 * moe_expert_capacity(T, 8, 2, 1.0) * s.model.hidden_size * 2;  // bf16
  const int64_t calls = s.model.num_layers * 4;  // 1 micro-batch, 2 forward + 2 backward
  EXPECT_EQ(a2a_bytes(1.0), calls * per_call * 7 / 8);
  EXPECT_EQ(a2a_bytes(2.0), 2 * a2a_bytes(1.0));
}

// The capacity factor sizes every expert's buffer: ceil(cf x tokens x top_k / experts) rows
// each, so the dispatch/combine all-to-all and the expert GEMMs grow with it.
TEST(LayerCosts, CapacityFactorSizesTheAllToAllAndTheExperts) {
  Scenario s = moe_llama(8);
  Plan p;
  p.dp = 64;
  p.ep = 8;
  auto a2a_bytes = [&](double cf) {
    s.model.moe_capacity_factor = cf;
    const LayerCosts L = layer_costs(s, p);
    for (const LayerCosts::Collective& c : L.collectives)
      if (c.kind == CollectiveKind::kAllToAll && c.group == GroupKind::kEp) return std::pair{c.bytes, L.moe_forward_flops};
    ADD_FAILURE() << "no EP all-to-all";
    return std::pair{int64_t{0}, 0.0};
  };
  // 4096 tokens x top-2 / 8 experts = 1024 rows per expert at cf 1, x 4096 hidden x 2 bytes.
  const auto [one, one_flops] = a2a_bytes(1.0);
  EXPECT_EQ(one, int64_t{8} * 1024 * 4096 * 2);
  const auto [more, more_flops] = a2a_bytes(1.25);
  EXPECT_EQ(more, int64_t{8} * 1280 * 4096 * 2);
  // 0.3 x 1024 = 307.2 rows round up to 308 per expert (Megatron get_capacity: ceil).
  EXPECT_EQ(a2a_bytes(0.3).first, int64_t{8} * 308 * 4096 * 2);
  // Expert GEMMs scale with the rows; the router (4096 x 8 x 4096) does not.
  const double router_flops = 2.0 * 4096 * 8 * 4096;
  EXPECT_NEAR((more_flops - router_flops) / (one_flops - router_flops), 1.25, 1e-9);
}

// Expert tensor parallelism (docs/analytical_model.md, "Mixture of experts"): per rank and micro-batch, with T = mbs x seq / cp
// and T_loc = T / tp routed tokens, cap = capacity(T_loc): dispatch / combine all-to-all of
// E x cap x h elements over the EP group (2 forward, 2 backward), and with etp > 1 an all-gather
// and a reduce-scatter of etp x E x cap x h elements over the expert-TP group (1 + 1 each way).
Scenario moe_on(int64_t gpus) { return moe_llama(8, 1.25, gpus); }

// A dropless MoE layer is captured by CUDA graphs only up to its dispatcher: it keeps the eager
// floor; a drop-and-pad one is captured whole.
TEST(LayerCosts, CudaGraphsCaptureDroplessMoeLayersOnlyInPart) {
  Scenario moe = moe_on(64);
  moe.training.cuda_graphs = true;
  EXPECT_TRUE(cost_detail::make_ctx(moe).graphed_layers);
  moe.model.moe_dropless = true;
  EXPECT_FALSE(cost_detail::make_ctx(moe).graphed_layers);
  moe.training.cuda_graphs = false;
  EXPECT_FALSE(cost_detail::make_ctx(moe).graphed_layers);
}

struct ExpertCase {
  int64_t tp, etp, ep, cp, mbs;
};

TEST(LayerCosts, ExpertTensorParallelBytesFollowTheContract) {
  const Scenario s = moe_on(64);
  const double h = 4096, E = 8, e = 2, fe = 14336;
  for (const ExpertCase& x : {ExpertCase{1, 1, 8, 1, 1}, ExpertCase{2, 1, 4, 1, 1}, ExpertCase{1, 2, 2, 1, 2},
                              ExpertCase{2, 2, 2, 2, 1}, ExpertCase{4, 2, 8, 1, 1}, ExpertCase{2, 4, 2, 2, 2},
                              ExpertCase{8, 8, 1, 1, 1}}) {
    for (Recompute rc : {Recompute::kNone, Recompute::kFull}) {
      Plan p;
      p.tp = x.tp;
      p.etp = x.etp;
      p.ep = x.ep;
      p.cp = x.cp;
      p.dp = 64 / (x.tp * x.cp);
      p.micro_batch_size = x.mbs;
      p.sequence_parallel = x.tp > 1;
      p.recompute = rc;
      const std::string what = "tp" + std::to_string(x.tp) + " etp" + std::to_string(x.etp) + " ep" + std::to_string(x.ep) +
                               " cp" + std::to_string(x.cp) + " mbs" + std::to_string(x.mbs) + " " + to_string(rc);
      ASSERT_TRUE(quick_estimate(s, p).reject_reason.empty() || quick_estimate(s, p).peak_memory_gib > 0) << what;
      const double T = static_cast<double>(x.mbs) * 4096 / static_cast<double>(x.cp);
      const double T_loc = T / static_cast<double>(x.tp);
      const int64_t cap = moe_expert_capacity(static_cast<int64_t>(T_loc), 8, 2, 1.25);
      const auto dispatch = static_cast<int64_t>(E * static_cast<double>(cap) * h * e);
      const int64_t gathered = x.etp * dispatch;
      const int32_t rec = rc == Recompute::kFull ? 1 : 0;
      const LayerCosts L = layer_costs(s, p);
      int found = 0;
      for (const LayerCosts::Collective& c : L.collectives) {
        if (c.group == GroupKind::kEp) {
          ++found;
          EXPECT_EQ(c.kind, CollectiveKind::kAllToAll) << what;
          EXPECT_EQ(c.bytes, dispatch) << what;
          EXPECT_EQ(c.forward_count, 2) << what;
          EXPECT_EQ(c.backward_count, 2) << what;
          EXPECT_EQ(c.recompute_count, 2 * rec) << what;
        }
        if (c.group == GroupKind::kExpertTp) {
          ++found;
          EXPECT_TRUE(c.kind == CollectiveKind::kAllGather || c.kind == CollectiveKind::kReduceScatter) << what;
          EXPECT_EQ(c.bytes, gathered) << what;
          EXPECT_EQ(c.forward_count, 1) << what;
          EXPECT_EQ(c.backward_count, 1) << what;
          EXPECT_EQ(c.recompute_count, rec) << what;
          EXPECT_GT(c.time_s, 0) << what;
        }
      }
      EXPECT_EQ(found, (x.ep > 1 ? 1 : 0) + (x.etp > 1 ? 2 : 0)) << what;
      // Router on T_loc tokens; experts: E x cap rows through fc1 (gate + up, 2 fe) and fc2 (fe),
      // whatever etp (each rank does etp x the rows on 1/etp of the columns).
      const double flops = 2.0 * T_loc * E * h + 2.0 * E * static_cast<double>(cap) * h * 3.0 * fe;
      EXPECT_NEAR(L.moe_forward_flops / flops, 1.0, 1e-12) << what;
      // The ETP time is exposed expert-block communication, like the all-to-all.
      EXPECT_DOUBLE_EQ(L.ep_exposed_s, L.ep_total_s) << what;
      EXPECT_EQ(L.ep_total_s > 0, x.ep > 1 || x.etp > 1) << what;
    }
  }
}

TEST(Memory, ExpertStatesAndActivationsFollowExpertTp) {
  const Scenario s = moe_on(64);
  const ModelShape m = model_shape(s.model);
  Plan p;
  p.tp = 2;
  p.dp = 32;
  p.ep = 4;
  p.sequence_parallel = true;
  p.zero_stage = 0;
  const int64_t expert_params = 3 * 4096 * 14336;  // one expert: gate, up, down
  for (int64_t etp : {1, 2, 4, 8}) {
    p.etp = etp;
    const StageParameters sp = stage_parameters(m, p, 0, 32);
    EXPECT_DOUBLE_EQ(sp.expert, 32.0 * 8 / 4 * static_cast<double>(expert_params) / static_cast<double>(etp)) << etp;
    // Activations: the expert block keeps the etp x E x cap gathered input rows (h wide, and the
    // fp32 routing probability of each); its FFN internals (etp x E x cap rows, 3 x fe / etp
    // wide) and the router's fp32 probabilities of the T / tp routed tokens do not depend on etp.
    const double cap = static_cast<double>(moe_expert_capacity(2048, 8, 2, 1.25));
    const double with = layer_activation_bytes(m, 1, 2, 1, true, Recompute::kNone, 2.0, etp);
    const double with_one = layer_activation_bytes(m, 1, 2, 1, true, Recompute::kNone, 2.0, 1);
    EXPECT_DOUBLE_EQ(with - with_one, static_cast<double>(etp - 1) * 8 * cap * (2.0 * 4096 + 4.0)) << etp;
  }
  // Without ZeRO every state of the local expert shards is held: etp 2 halves them.
  p.etp = 1;
  const MemoryBreakdown one = stage_memory(m, s, p, 0, 32);
  p.etp = 2;
  const MemoryBreakdown two = stage_memory(m, s, p, 0, 32);
  const double expert1 = 32.0 * 2 * static_cast<double>(expert_params);  // etp 1: 2 local experts, whole
  EXPECT_NEAR(one.weights_bytes - two.weights_bytes, 2.0 * expert1 / 2, 1e3);
  EXPECT_NEAR(one.optimizer_bytes - two.optimizer_bytes, 12.0 * expert1 / 2, 1e3);
  // ZeRO-1 shards expert optimizer states over the expert-DP group, tp*cp*dp / (etp*ep) ranks:
  // 16 ranks of whole experts or 8 ranks of halves hold the same per rank.
  p.zero_stage = 1;
  p.etp = 1;
  const MemoryBreakdown z1 = stage_memory(m, s, p, 0, 32);
  p.etp = 2;
  const MemoryBreakdown z2 = stage_memory(m, s, p, 0, 32);
  EXPECT_NEAR(z1.optimizer_bytes, z2.optimizer_bytes, 1e3);
  EXPECT_NEAR(z1.weights_bytes - z2.weights_bytes, 2.0 * expert1 / 2, 1e3);
}

// Megatron-Bridge's H100 recipe for Qwen3-30B-A3B (25.09: 16 GPUs, fp8, TP 1, PP 2, VP 24,
// EP 8, micro-batch 2, no recompute; its performance table ran it) fits in 80 GB: the experts
// keep their GEMM inputs in fp8 and no combine input.
TEST(Iteration, Qwen3MoeRecipeFitsAnH100WithoutRecompute) {
  Scenario s = llama8b("H100-SXM", 16);
  s.model.num_layers = 48;
  s.model.hidden_size = 2048;
  s.model.num_attention_heads = 32;
  s.model.num_kv_heads = 4;
  s.model.head_dim = 128;
  s.model.num_experts = 128;
  s.model.moe_top_k = 8;
  s.model.moe_ffn_hidden_size = 768;
  s.model.vocab_size = 151936;
  s.model.seq_length = 4096;
  s.model.tie_embeddings = false;
  s.training.precision = Precision::kFp8;
  s.training.global_batch_size = 512;
  s.training.grad_reduce_in_fp32 = false;
  Plan p;
  p.pp = 2;
  p.vpp = 24;
  p.schedule = Schedule::kInterleaved;
  p.dp = 8;
  p.ep = 8;
  p.micro_batch_size = 2;
  p.zero_stage = 1;
  p.recompute = Recompute::kNone;
  const QuickEstimate q = quick_estimate(s, p);
  EXPECT_TRUE(q.fits) << q.reject_reason;
  // The model states alone are ~29 GiB (the 16 local experts' optimizer states are not sharded:
  // expert-DP is 1); the activations of about two micro-batches through 24 layers the rest.
  EXPECT_GT(q.peak_memory_gib, 50.0);
  EXPECT_LT(q.peak_memory_gib, 74.0);
}

// EP communication overlap (Megatron-Core's combined 1F1B): the all-to-alls of the paired steps
// hide behind the other pass's compute windows (attention forward, expert block backward and
// forward, attention backward), paying only the SMs they hold; the first forward and the last
// backward of the 4 micro-batches run alone, their all-to-alls exposed.
TEST(LayerCosts, EpOverlapHidesTheAllToAllsBehindTheOtherPassesCompute) {
  const Scenario s = moe_llama(8, 1.0, 64);  // 256 sequences on 64 ranks: 4 micro-batches
  Plan p;
  p.dp = 64;
  p.ep = 8;
  p.zero_stage = 1;
  const LayerCosts off = layer_costs(s, p);
  p.ep_comm_overlap = true;
  const LayerCosts on = layer_costs(s, p);
  EXPECT_DOUBLE_EQ(on.ep_total_s, off.ep_total_s);
  EXPECT_DOUBLE_EQ(off.ep_exposed_s, off.ep_total_s);
  const cost_detail::Ctx c = cost_detail::make_ctx(s);
  const cost_detail::LayerCompute lc = cost_detail::layer_compute(c, model_shape(s.model), p);
  const double a2a = off.ep_total_s / 4;  // dispatch, combine and their gradients
  // EP 8 inside the node: each all-to-all fits in 90% of its window.
  for (double window : {lc.fwd.s - lc.moe_fwd.s, lc.moe_fwd.s, lc.moe_bwd.s, lc.bwd.s - lc.moe_bwd.s})
    ASSERT_LT(a2a, cost_detail::kOverlapEfficiency * window);
  const double sm_share = cost_detail::kNcclOverlapSms / static_cast<double>(c.prof->sm_count);
  EXPECT_NEAR(on.ep_exposed_s, 4 * a2a * (0.25 + 0.75 * sm_share), 1e-12);
  // More micro-batches: fewer run alone.
  Scenario more = s;
  more.training.global_batch_size = 1024;
  EXPECT_NEAR(layer_costs(more, p).ep_exposed_s, 4 * a2a * (1.0 / 16 + 15.0 / 16 * sm_share), 1e-12);
  // EP over 8 nodes of one GPU on a slow network: a window hides at most 90% of itself.
  Scenario slow = s;
  slow.cluster.gpus_per_node = 1;
  slow.cluster.inter_node.bandwidth_GBps = 5;
  p.ep_comm_overlap = false;
  const LayerCosts slow_off = layer_costs(slow, p);
  p.ep_comm_overlap = true;
  const LayerCosts slow_on = layer_costs(slow, p);
  EXPECT_LT(slow_on.ep_exposed_s, slow_off.ep_exposed_s);
  EXPECT_GT(slow_on.ep_exposed_s, slow_off.ep_exposed_s - 0.75 * cost_detail::kOverlapEfficiency * (lc.fwd.s + lc.bwd.s));
}

// The combined 1F1B runs one forward more before its first backward: without a pipeline two
// micro-batches' activations are kept instead of one.
TEST(Iteration, EpOverlapKeepsOneMoreMicroBatchOfActivations) {
  const Scenario s = moe_llama(8, 1.0, 64);
  Plan p;
  p.dp = 64;
  p.ep = 8;
  p.zero_stage = 1;
  const ModelShape m = model_shape(s.model);
  const MemoryBreakdown off = stage_memory(m, s, p, 0, 32);
  p.ep_comm_overlap = true;
  const MemoryBreakdown on = stage_memory(m, s, p, 0, 32);
  const double per_layer = layer_activation_bytes(m, 1, 1, 1, false, Recompute::kNone, 2.0);
  EXPECT_NEAR(on.activations_bytes - off.activations_bytes, 32 * per_layer, 1e-6 * per_layer);
}

// Where Megatron-Core's TransformerConfig refuses the overlap, a plan with it is rejected with
// the reason.
TEST(Iteration, EpOverlapRunsOnlyWhereMegatronAcceptsIt) {
  Scenario s = moe_llama(8, 1.0, 64);
  Plan p;
  p.dp = 32;
  p.pp = 2;
  p.ep = 8;
  p.zero_stage = 1;
  p.ep_comm_overlap = true;
  auto reason = [&](const Scenario& sc, const Plan& plan) { return quick_estimate(sc, plan).reject_reason; };
  EXPECT_NE(reason(s, p).find("virtual pipeline stages"), std::string::npos) << reason(s, p);
  p.vpp = 2;
  p.schedule = Schedule::kInterleaved;
  EXPECT_TRUE(quick_estimate(s, p).fits) << reason(s, p);
  p.recompute = Recompute::kFull;
  EXPECT_NE(reason(s, p).find("full recompute"), std::string::npos) << reason(s, p);
  p.recompute = Recompute::kNone;
  Scenario titan = s;
  titan.training.framework = Framework::kTorchtitan;
  EXPECT_NE(reason(titan, p).find("torchtitan has none"), std::string::npos) << reason(titan, p);
  Plan dense = p;
  dense.ep = 1;
  EXPECT_NE(reason(s, dense).find("expert parallelism"), std::string::npos) << reason(s, dense);
}

// The router's forced load balancing spreads a dropless layer's tokens evenly: no rank of the EP
// group waits for a busier one, so its all-to-alls take what drop-and-pad at capacity factor 1
// takes (the same rows).
TEST(LayerCosts, ForcedLoadBalancingRemovesTheDroplessImbalance) {
  Scenario padded = moe_llama(8, 1.0, 64);
  Scenario dropless = padded;
  dropless.model.moe_dropless = true;
  Scenario balanced = dropless;
  balanced.model.moe_router_force_load_balancing = true;
  Plan p;
  p.dp = 64;
  p.ep = 8;
  const LayerCosts lp = layer_costs(padded, p), ld = layer_costs(dropless, p), lb = layer_costs(balanced, p);
  EXPECT_DOUBLE_EQ(lb.ep_total_s, lp.ep_total_s);
  EXPECT_NEAR(ld.ep_total_s, 1.3 * lb.ep_total_s, 1e-9 * ld.ep_total_s);  // one expert per rank: the whole excess
  EXPECT_LT(lb.forward_s, ld.forward_s);
}

// Qwen3's query and key norms (model.qk_layernorm): one more fused norm pass over q and k each
// way (read and write), two more modules for the host, and their inputs kept for the backward.
TEST(LayerCosts, QueryKeyNormsAddANormPassOverQueriesAndKeys) {
  Scenario s = llama8b("H100-SXM", 8);
  Plan p;
  p.dp = 8;
  const double T = 8192, q = 32 * 128, k = 8 * 128, e = 2;
  const cost_detail::LayerCompute plain = cost_detail::layer_compute(cost_detail::make_ctx(s), model_shape(s.model), p);
  s.model.qk_layernorm = true;
  const ModelShape m = model_shape(s.model);
  const cost_detail::LayerCompute normed = cost_detail::layer_compute(cost_detail::make_ctx(s), m, p);
  EXPECT_DOUBLE_EQ(normed.fwd.bytes - plain.fwd.bytes, 2.0 * e * (q + k) * T);
  EXPECT_DOUBLE_EQ(normed.bwd.bytes - plain.bwd.bytes, 2.0 * 2.0 * e * (q + k) * T);
  EXPECT_DOUBLE_EQ(normed.extra_host_ops_per_pass - plain.extra_host_ops_per_pass, 2.0);
  const ModelShape without = model_shape(llama8b("H100-SXM", 8).model);
  const double kept = layer_activation_bytes(m, 1, 1, 1, false, Recompute::kNone, e, 1, 0, Framework::kMegatron) -
                      layer_activation_bytes(without, 1, 1, 1, false, Recompute::kNone, e, 1, 0, Framework::kMegatron);
  EXPECT_DOUBLE_EQ(kept, e * (q + k) * T);
  EXPECT_EQ(parameter_counts(m).attention_per_layer - parameter_counts(without).attention_per_layer, 2 * 128);
}

// Qwen3-30B-A3B's MoE layer shape on 64 B200: 128 experts of 768 (gated), top-8, hidden 2048,
// 16 local experts at EP 8.
Scenario fine_grained_moe(const char* gpu) {
  Scenario s = moe_llama(128, 1.0, 64);
  s.cluster = cluster(gpu, 64);
  s.model.hidden_size = 2048;
  s.model.num_attention_heads = 32;
  s.model.num_kv_heads = 4;
  s.model.moe_top_k = 8;
  s.model.moe_ffn_hidden_size = 768;
  return s;
}

// Transformer Engine's GroupedLinear runs one GEMM per local expert, four at a time on its
// compute streams; DeepSpeed's experts run one after another; torchtitan's grouped GEMM is one
// kernel. The same FLOPs, but each launch pays its gap and each GEMM its own wave quantization.
TEST(LayerCosts, ExpertGemmsRunAsTheFrameworkLaunchesThem) {
  const Scenario s = fine_grained_moe("B200");
  Plan p;
  p.dp = 64;
  p.ep = 8;
  const ModelShape m = model_shape(s.model);
  cost_detail::Ctx c = cost_detail::make_ctx(s);
  EXPECT_EQ(c.expert_gemms_at_once, 4.0);  // Megatron-Core: TEGroupedMLP
  auto moe_forward = [&](double at_once) {
    c.expert_gemms_at_once = at_once;
    return cost_detail::layer_compute(c, m, p).moe_fwd;
  };
  const cost_detail::Op grouped = moe_forward(0), four = moe_forward(4), one = moe_forward(1);
  EXPECT_DOUBLE_EQ(four.flops, grouped.flops);
  EXPECT_DOUBLE_EQ(one.flops, grouped.flops);
  // fc1 and fc2: 16 launches one at a time against 4 rounds of four, and one grouped kernel.
  EXPECT_GE(one.s - four.s, 2.0 * (16.0 - 4.0) * cost_detail::kKernelGap_s);
  EXPECT_GE(four.s - grouped.s, 2.0 * (4.0 - 1.0) * cost_detail::kKernelGap_s);
  Scenario ds = s;
  ds.training.framework = Framework::kDeepspeed;
  EXPECT_EQ(cost_detail::make_ctx(ds).expert_gemms_at_once, 1.0);
  Scenario tt = s;
  tt.training.framework = Framework::kTorchtitan;
  EXPECT_EQ(cost_detail::make_ctx(tt).expert_gemms_at_once, 0.0);
}

// Per-tensor current scaling quantizes each expert's fp8 operand in three kernels after an
// amax pass over its 16-bit input; delayed scaling casts all the experts in one fused kernel.
// The forward casts fc1's and fc2's inputs: 2 x (3 x 16 - 1) more kernels and one more read of
// both inputs.
TEST(LayerCosts, CurrentScalingQuantizesEachExpertAfterAnAmaxPass) {
  Scenario s = fine_grained_moe("H100-SXM");
  s.training.precision = Precision::kFp8;
  Plan p;
  p.dp = 64;
  p.ep = 8;
  const ModelShape m = model_shape(s.model);
  const MoeTokenFlow f = moe_token_flow(m, p);
  ASSERT_EQ(f.local_experts, 16.0);
  s.training.fp8_recipe = Fp8Recipe::kDelayed;
  const cost_detail::Ctx c = cost_detail::make_ctx(s);
  const cost_detail::Op delayed = cost_detail::layer_compute(c, m, p).moe_fwd;
  s.training.fp8_recipe = Fp8Recipe::kTensorwise;
  const cost_detail::Op tensorwise = cost_detail::layer_compute(cost_detail::make_ctx(s), m, p).moe_fwd;
  const double amax_bytes = c.e * f.expert_rows * (static_cast<double>(m.hidden) + f.expert_ffn_local);
  EXPECT_NEAR(tensorwise.bytes - delayed.bytes, amax_bytes, 1e-9 * amax_bytes);
  EXPECT_NEAR(tensorwise.s - delayed.s, amax_bytes / c.hbm + 2.0 * (3.0 * 16.0 - 1.0) * cost_detail::kKernelGap_s, 1e-12);
  // MXFP8 and block scaling: one kernel per expert, no amax pass.
  s.cluster.gpu = find_gpu_preset("B200")->spec;
  s.training.fp8_recipe = Fp8Recipe::kDelayed;
  const cost_detail::Op b200_delayed = cost_detail::layer_compute(cost_detail::make_ctx(s), m, p).moe_fwd;
  s.training.fp8_recipe = Fp8Recipe::kMxfp8;
  const cost_detail::Op mx = cost_detail::layer_compute(cost_detail::make_ctx(s), m, p).moe_fwd;
  EXPECT_DOUBLE_EQ(mx.bytes, b200_delayed.bytes);
  EXPECT_NEAR(mx.s - b200_delayed.s, 2.0 * (16.0 - 1.0) * cost_detail::kKernelGap_s, 1e-12);
}

// Megatron-Core's QKV and fc1 are Transformer Engine norm-linears: under delayed scaling the norm
// writes their fp8 input itself (1 byte where it would write 2, no cast kernel) and the weight
// gradient's transposed copy is a transpose of the fp8 rows; block scaling casts the norm's
// 16-bit output in a kernel of its own that writes both copies. With sequence parallelism the
// rank quantizes its T / tp rows before the all-gather and, under delayed scaling, the backward
// transposes the gathered T rows; without it, all T rows right after the norm.
TEST(LayerCosts, TransformerEngineNormsQuantizeTheirOwnOutput) {
  Scenario s = llama8b("H100-SXM", 8);
  s.training.precision = Precision::kFp8;
  const ModelShape m = model_shape(s.model);
  const double T = 8192, h = 4096, e = 2, gap = cost_detail::kKernelGap_s;
  auto compute = [&](Fp8Recipe recipe, const Plan& p) {
    s.training.fp8_recipe = recipe;
    return cost_detail::layer_compute(cost_detail::make_ctx(s), m, p);
  };
  const double hbm = cost_detail::make_ctx(s).hbm;
  const Plan sp = tp4_sp_plan();
  cost_detail::LayerCompute delayed = compute(Fp8Recipe::kDelayed, sp), block = compute(Fp8Recipe::kBlockwise, sp);
  const double shard = T / 4.0;
  // Two norm-linears (QKV, fc1): block scaling reads 2 and writes 1 + 1 bytes per shard element;
  // the delayed norm writes 1 byte less per shard element.
  const double fwd_bytes = 2.0 * ((e + 2.0) + (e - 1.0)) * shard * h;
  EXPECT_NEAR(block.fwd.bytes - delayed.fwd.bytes, fwd_bytes, 1e-9 * fwd_bytes);
  EXPECT_NEAR(block.fwd.s - delayed.fwd.s, fwd_bytes / hbm + 2.0 * gap, 1e-12);
  // The backward transposes the gathered rows of both inputs (read and write 1 byte each). The
  // projection's and fc2's output gradients too: delayed scaling casts their shards row-wise
  // (read 2, write 1) and transposes the gathered rows, block scaling casts both copies of the
  // shards (read 2, write 1 + 1) and gathers them.
  const double transpose_bytes = 2.0 * 2.0 * T * h + 2.0 * (2.0 * T * h - shard * h);
  EXPECT_NEAR(delayed.bwd.bytes - block.bwd.bytes, transpose_bytes, 1e-9 * transpose_bytes);
  EXPECT_NEAR(delayed.bwd.s - block.bwd.s, transpose_bytes / hbm + 4.0 * gap, 1e-12);
  // Without tensor parallelism both transposes run in the forward, after the norm.
  Plan dp;
  dp.dp = 8;
  delayed = compute(Fp8Recipe::kDelayed, dp);
  block = compute(Fp8Recipe::kBlockwise, dp);
  const double dp_fwd_bytes = 2.0 * ((e + 2.0) + (e - 1.0) - 2.0) * T * h;
  EXPECT_NEAR(block.fwd.bytes - delayed.fwd.bytes, dp_fwd_bytes, 1e-9 * dp_fwd_bytes);
  EXPECT_NEAR(block.fwd.s - delayed.fwd.s, dp_fwd_bytes / hbm, 1e-12);
  EXPECT_DOUBLE_EQ(block.bwd.bytes, delayed.bwd.bytes);
}

// The backward's fp8 casts of the output gradients: QKV's and fc1's gradients are the rank's own
// columns of all T rows; the projection's and fc2's arrive sequence-sharded, and Transformer
// Engine quantizes the T / tp shard before gathering it. Current scaling reads each cast's
// input once more for its amax and adds two kernels per cast, so its backward over delayed
// scaling's is that read of exactly the elements each cast quantizes.
TEST(LayerCosts, RowParallelGradientsAreQuantizedBeforeTheirGather) {
  Scenario s = llama8b("H100-SXM", 8);
  s.training.precision = Precision::kFp8;
  const ModelShape m = model_shape(s.model);
  const Plan p = tp4_sp_plan();
  const double T = 8192, h = 4096, q = 4096, kv = 1024, f = 14336, t = 4, e = 2;
  s.training.fp8_recipe = Fp8Recipe::kDelayed;
  const cost_detail::Ctx c = cost_detail::make_ctx(s);
  const cost_detail::Op delayed = cost_detail::layer_compute(c, m, p).bwd;
  s.training.fp8_recipe = Fp8Recipe::kTensorwise;
  const cost_detail::Op tensorwise = cost_detail::layer_compute(cost_detail::make_ctx(s), m, p).bwd;
  const double cast_elements = T * (q + 2.0 * kv) / t + T * 2.0 * f / t + 2.0 * (T / t) * h;
  EXPECT_NEAR(tensorwise.bytes - delayed.bytes, e * cast_elements, 1e-9 * e * cast_elements);
  EXPECT_NEAR(tensorwise.s - delayed.s, e * cast_elements / c.hbm + 4.0 * 2.0 * cost_detail::kKernelGap_s, 1e-12);
}

TEST(Iteration, MoeWithTensorParallelismNeedsSequenceParallelism) {
  const Scenario s = moe_on(64);
  Plan p;
  p.tp = 2;
  p.dp = 32;
  p.ep = 4;
  p.sequence_parallel = false;
  const QuickEstimate q = quick_estimate(s, p);
  EXPECT_FALSE(q.fits);
  EXPECT_NE(q.reject_reason.find("needs sequence parallelism"), std::string::npos) << q.reject_reason;
  p.sequence_parallel = true;
  EXPECT_TRUE(quick_estimate(s, p).reject_reason.find("sequence parallelism") == std::string::npos);
  // etp x ep must tile the stage; etp must divide the expert FFN.
  p.etp = 4;
  p.ep = 32;
  EXPECT_NE(quick_estimate(s, p).reject_reason.find("etp x ep"), std::string::npos) << quick_estimate(s, p).reject_reason;
  Scenario odd = s;
  odd.model.moe_ffn_hidden_size = 14336 + 2;  // 14338 = 2 x 7169
  p.ep = 4;
  EXPECT_NE(quick_estimate(odd, p).reject_reason.find("expert FFN"), std::string::npos) << quick_estimate(odd, p).reject_reason;
  // Dense models: no expert TP.
  Scenario dense = llama8b("H100-SXM", 64);
  Plan d;
  d.tp = 2;
  d.dp = 32;
  d.etp = 1;
  EXPECT_NE(quick_estimate(dense, d).reject_reason.find("mixture-of-experts"), std::string::npos);
}

// Dropless routing (Megatron's default): the mean load equals drop-and-pad at capacity 1, but
// the busiest rank of the EP group paces the expert GEMMs and the all-to-all. Bytes and FLOPs
// stay the mean; only time grows, by kMoeExpertLoadImbalance - 1 = 0.3 of the expert work with
// one expert per rank, by 0.3 / sqrt(8) with eight, and not at all without expert parallelism.
TEST(LayerCosts, DroplessImbalancePacesTheExpertParallelGroup) {
  Scenario s = moe_llama(8);
  Plan p;
  p.dp = 64;
  p.ep = 8;
  auto a2a_of = [](const LayerCosts& L) {
    for (const LayerCosts::Collective& c : L.collectives)
      if (c.kind == CollectiveKind::kAllToAll && c.group == GroupKind::kEp) return c;
    ADD_FAILURE() << "no EP all-to-all";
    return LayerCosts::Collective{};
  };
  const LayerCosts pad = layer_costs(s, p);
  s.model.moe_dropless = true;
  const LayerCosts drop = layer_costs(s, p);
  EXPECT_EQ(a2a_of(drop).bytes, a2a_of(pad).bytes);
  EXPECT_NEAR(a2a_of(drop).time_s / a2a_of(pad).time_s, 1.3, 1e-9);
  EXPECT_DOUBLE_EQ(drop.moe_forward_flops, pad.moe_forward_flops);
  EXPECT_DOUBLE_EQ(drop.moe_forward_mem_bytes, pad.moe_forward_mem_bytes);
  // The expert work (all of the MoE block but the router, the dispatcher kernels and the host
  // sync) waits 0.3 of itself on the busiest rank.
  const double extra_fwd = drop.moe_forward_s - pad.moe_forward_s - 40e-6;  // kMoeHostSync_s
  const double extra_bwd = drop.moe_backward_s - pad.moe_backward_s;
  EXPECT_GT(extra_fwd, 0.2 * pad.moe_forward_s);
  EXPECT_LT(extra_fwd, 0.3 * pad.moe_forward_s);
  EXPECT_GT(extra_bwd, 0.2 * pad.moe_backward_s);
  EXPECT_LT(extra_bwd, 0.3 * pad.moe_backward_s);
  EXPECT_NEAR(drop.forward_s - pad.forward_s, drop.moe_forward_s - pad.moe_forward_s, 1e-12);

  // 64 experts, 8 per rank: the rank's excess is 0.3 / sqrt(8).
  s.model.num_experts = 64;
  s.model.moe_ffn_hidden_size = 1792;
  s.model.moe_dropless = false;
  const LayerCosts pad64 = layer_costs(s, p);
  s.model.moe_dropless = true;
  const LayerCosts drop64 = layer_costs(s, p);
  EXPECT_NEAR(a2a_of(drop64).time_s / a2a_of(pad64).time_s, 1.0 + 0.3 / std::sqrt(8.0), 1e-9);

  // Without expert parallelism no rank waits for another: only the host sync remains.
  p.ep = 1;
  s.model.num_experts = 8;
  s.model.moe_ffn_hidden_size = 14336;
  s.model.moe_dropless = false;
  const LayerCosts pad1 = layer_costs(s, p);
  s.model.moe_dropless = true;
  const LayerCosts drop1 = layer_costs(s, p);
  EXPECT_NEAR(drop1.moe_forward_s - pad1.moe_forward_s, 40e-6, 1e-12);
  EXPECT_DOUBLE_EQ(drop1.moe_backward_s, pad1.moe_backward_s);
}

// With several experts per rank the dispatcher sorts the received tokens into per-expert
// chunks and back (two reads and writes of every routed row per pass); with one expert per
// rank, or without expert parallelism, there is nothing to sort.
TEST(LayerCosts, ChunkSortOnlyWithSeveralLocalExperts) {
  Scenario s = moe_llama(64);
  s.model.moe_ffn_hidden_size = 1792;
  Plan p;
  p.dp = 64;
  p.ep = 8;
  const double several = layer_costs(s, p).moe_forward_mem_bytes;
  p.ep = 64;
  const double one_each = layer_costs(s, p).moe_forward_mem_bytes;
  // Expert GEMM weights: 8 experts per rank vs 1; the sort: 4 x 2 bytes x 4096 h x 8192 rows.
  const double sort_bytes = 4.0 * 2.0 * 4096.0 * 8192.0;
  EXPECT_GT(several - one_each, sort_bytes);
  const double weights = 7.0 * 3.0 * 4096.0 * 1792.0 * 2.0;  // 7 more experts' fc1 (2 f) + fc2 (f), bf16
  EXPECT_NEAR(several - one_each, sort_bytes + weights, 0.01 * sort_bytes);
}

TEST(CalibrationProfiles, MeasuredThroughputReplacesThePresets) {
  CalibrationProfile prof;
  prof.device_kind = DeviceKind::kGpu;
  prof.device_name = "NVIDIA H100 80GB HBM3";
  prof.device_count = 8;
  for (int64_t m : {1024, 8192})
    for (int64_t n : {1024, 8192})
      for (int64_t k : {1024, 8192}) {
        const double tflops = 500.0;  // flat, to check the lookup
        prof.matmul.push_back(make_matmul_sample(MatmulPrecision::kBf16, m, n, k, 2.0 * m * n * k / (tflops * 1e6)));
      }
  prof.memory_bandwidth_GBps = 3000;
  for (int64_t bytes : {int64_t{1} << 20, int64_t{1} << 30})
    prof.collectives.push_back(make_collective_sample(CollectiveKind::kAllReduce, 8, bytes, DType::kFp32,
                                                      static_cast<double>(bytes) * 2 * 7 / 8 / 200e3));  // busbw 200 GB/s
  const auto path = (std::filesystem::temp_directory_path() / "monarch_cost_model_profile.json").string();
  ASSERT_TRUE(write_profile(path, prof).empty());
  ASSERT_TRUE(calibration_profile(path).ok());

  ClusterConfig c = cluster("H100-SXM", 8);
  const double preset_gemm = compute_time_s(c.gpu, Precision::kBf16, 2.0 * 4096 * 4096 * 4096, 0, 4096, 4096, 4096);
  const double preset_ew = compute_time_s(c.gpu, Precision::kBf16, 0, 1e9, 0, 0, 0);
  c.gpu.profile = path;
  const double clock = gpu_profile(c.gpu).sustained_clock_fraction;
  EXPECT_NEAR(compute_time_s(c.gpu, Precision::kBf16, 2.0 * 4096 * 4096 * 4096, 0, 4096, 4096, 4096),
              2.0 * 4096 * 4096 * 4096 / (500e12 * clock), 1e-5);
  EXPECT_NE(preset_gemm, compute_time_s(c.gpu, Precision::kBf16, 2.0 * 4096 * 4096 * 4096, 0, 4096, 4096, 4096));
  EXPECT_NEAR(compute_time_s(c.gpu, Precision::kBf16, 0, 1e9, 0, 0, 0), 1e9 / 3000e9, 1e-5);
  EXPECT_NE(preset_ew, compute_time_s(c.gpu, Precision::kBf16, 0, 1e9, 0, 0, 0));
  // fp8 was not measured: the preset model answers.
  ClusterConfig plain = cluster("H100-SXM", 8);
  EXPECT_DOUBLE_EQ(compute_time_s(c.gpu, Precision::kFp8, 1e12, 0, 4096, 4096, 4096),
                   compute_time_s(plain.gpu, Precision::kFp8, 1e12, 0, 4096, 4096, 4096));
  // Intra-node collectives from the measured bus bandwidth.
  GroupSpan g{8, 1, 8, false, 8};
  EXPECT_NEAR(collective_time_s(CollectiveKind::kAllReduce, int64_t{1} << 28, g, c),
              static_cast<double>(int64_t{1} << 28) * 2 * 7 / 8 / 200e9, 1e-5);
  // A profile that cannot be read is reported, and the presets answer.
  EXPECT_FALSE(calibration_profile("/nonexistent/profile.json").ok());
  plain.gpu.profile = "/nonexistent/profile.json";
  EXPECT_DOUBLE_EQ(compute_time_s(plain.gpu, Precision::kBf16, 1e12, 0, 4096, 4096, 4096),
                   compute_time_s(cluster("H100-SXM", 8).gpu, Precision::kBf16, 1e12, 0, 4096, 4096, 4096));
}

}  // namespace
}  // namespace monarch

namespace monarch {
namespace {

// A schedule that cannot run leaves the plan space with the schedule's reason: Megatron's
// interleaved 1F1B needs the micro-batch count to be a multiple of the pipeline degree
// (128 samples over DP 8 are 16 micro-batches: pp 4 runs them, pp 32 does not).
TEST(Iteration, AScheduleThatCannotRunIsRefusedWithItsReason) {
  const Scenario s = llama8b("H100-SXM", 256);
  Plan p;
  p.tp = 1;
  p.pp = 32;
  p.dp = 8;
  p.vpp = 1;
  p.schedule = Schedule::kInterleaved;
  const QuickEstimate q = quick_estimate(s, p);
  EXPECT_NE(q.reject_reason.find("multiple of the pipeline degree"), std::string::npos) << q.reject_reason;
  EXPECT_FALSE(estimate_plan(s, p).memory.fits);
  p.tp = 8;
  p.pp = 4;
  EXPECT_EQ(quick_estimate(s, p).reject_reason.find("pipeline degree"), std::string::npos) << quick_estimate(s, p).reject_reason;
}

}  // namespace
}  // namespace monarch

namespace monarch {
namespace {

// Llama 3 70B on 64 GPUs of `gpu` in fp8, FSDP over all of them with micro-batches of 2, as
// Megatron-Bridge's GB200 recipe runs it (LLAMA3_70B_GB200_FP8_CS_BASE_CONFIG), recompute none.
std::pair<Scenario, Plan> llama70b_fsdp(const char* gpu) {
  Scenario s = llama8b(gpu, 64, Precision::kFp8);
  s.model = find_model_preset("llama3-70b")->config;
  s.training.global_batch_size = 256;
  Plan p;
  p.dp = 64;
  p.micro_batch_size = 2;
  p.zero_stage = 3;
  return {s, p};
}

// Transformer Engine's default offload schedule: a copy starts as its layer's forward ends and
// must end before the layer `layers - offloaded` later starts. Copies no longer than a layer
// hide; with one set on the GPU every copy waits; longer copies queue on the stream.
TEST(ActivationOffload, CopiesHideBehindTheLayersUntilTheyAreLonger) {
  EXPECT_EQ(offload_stall_s(80, 40, 1.0, 1.0), 0.0);
  EXPECT_EQ(offload_stall_s(80, 0, 1.0, 5.0), 0.0);
  // 3 layers, 2 offloaded, one set on the GPU: both copies wait, 0.5 each.
  EXPECT_DOUBLE_EQ(offload_stall_s(3, 2, 1.0, 0.5), 1.0);
  // 4 layers, 2 offloaded, copies of 3: layer 2 waits for copy 0 (1..4), layer 3 for copy 1
  // (4..7), so the pass ends at 8 instead of 4.
  EXPECT_DOUBLE_EQ(offload_stall_s(4, 2, 1.0, 3.0), 4.0);
  // 80 layers, 40 offloaded, copies twice a layer: the last copy ends at 1 + 40 x 2 = 81, so
  // the last layer runs 81..82.
  EXPECT_DOUBLE_EQ(offload_stall_s(80, 40, 1.0, 2.0), 2.0);
}

// The offloaded layers' activations leave the GPU, exactly those bytes per layer; and on a
// GB200 the fewest layers that fit the 70B plan without recompute are what the search tries.
TEST(ActivationOffload, FreesTheOffloadedLayersActivationsAndFindsTheFewestThatFit) {
  auto [s, p] = llama70b_fsdp("GB200");
  const ModelShape m = model_shape(s.model);
  const double per_layer = plan_layer_activation_bytes(m, s, p);
  const double all = stage_memory(m, s, p, 0, m.layers).activations_bytes;
  Plan off = p;
  off.activation_offload_layers = 30;
  EXPECT_NEAR(all - stage_memory(m, s, off, 0, m.layers).activations_bytes, 30 * per_layer, 1e-6 * per_layer);

  ASSERT_FALSE(quick_estimate(s, p).fits) << quick_estimate(s, p).peak_memory_gib;
  const int64_t n = fewest_offload_layers_to_fit(s, p);
  ASSERT_GT(n, 0);
  ASSERT_LT(n, 80);
  off.activation_offload_layers = n;
  EXPECT_TRUE(quick_estimate(s, off).fits) << quick_estimate(s, off).reject_reason;
  off.activation_offload_layers = n - 1;
  EXPECT_FALSE(quick_estimate(s, off).fits);
  EXPECT_EQ(fewest_offload_layers_to_fit(s, off), n);  // the plan's own count does not matter

  // Where offloading cannot run: a pipeline, recompute, another framework.
  Plan piped = p;
  piped.pp = 2;
  piped.dp = 32;
  EXPECT_EQ(fewest_offload_layers_to_fit(s, piped), -1);
  Plan recomputed = p;
  recomputed.recompute = Recompute::kSelective;
  EXPECT_EQ(fewest_offload_layers_to_fit(s, recomputed), -1);
  Scenario titan = s;
  titan.training.framework = Framework::kTorchtitan;
  EXPECT_EQ(fewest_offload_layers_to_fit(titan, p), -1);
  off.activation_offload_layers = 10;
  EXPECT_NE(quick_estimate(titan, off).reject_reason.find("torchtitan has none"), std::string::npos)
      << quick_estimate(titan, off).reject_reason;
}

// The copies cost time only where the host link is much slower than the layers: over GB200's
// NVLink-C2C (half a Grace's LPDDR5X per GPU) the 70B layer's copy hides behind the layers kept on
// the GPU; over a B200's PCIe 5.0 it does not, and the forward and the backward wait as offload_stall_s says, on every
// micro-batch, counted as exposed communication.
TEST(ActivationOffload, CopiesOverPcieStallTheLayersAndOverC2cHide) {
  for (const char* gpu : {"GB200", "B200"}) {
    auto [s, p] = llama70b_fsdp(gpu);
    Plan off = p;
    off.activation_offload_layers = 40;
    const LayerCosts L = layer_costs(s, off);
    const double copy_s = static_cast<double>(L.offload_bytes) / host_link_bytes_per_s(s.cluster.gpu);
    EXPECT_NEAR(static_cast<double>(L.offload_bytes), plan_layer_activation_bytes(model_shape(s.model), s, off), 1.0);
    const double stall = offload_stall_s(80, 40, L.forward_s + L.host_forward_s, copy_s) +
                         offload_stall_s(80, 40, L.backward_s + L.host_backward_s, copy_s);
    const double micro_batches = 256.0 / (64 * 2);
    const BackendResult with = estimate_plan(s, off), without = estimate_plan(s, p);
    EXPECT_NEAR(with.iteration_time_s - without.iteration_time_s, micro_batches * stall, 1e-9) << gpu;
    EXPECT_NEAR(with.time_breakdown_s.exposed_comm - without.time_breakdown_s.exposed_comm, micro_batches * stall, 1e-9) << gpu;
    if (std::string(gpu) == "GB200") {
      EXPECT_NEAR(stall, 0.0, 1e-12);  // a copy a little longer than a forward, 40 layers to end in
      EXPECT_LT(copy_s, L.backward_s);
    } else {
      EXPECT_GT(copy_s, L.forward_s);
      EXPECT_GT(stall, 0.0);
    }
  }
  // The host link: PCIe 5.0 x16 less its packet overhead; a Grace's memory shared by two GPUs.
  EXPECT_NEAR(host_link_bytes_per_s(find_gpu_preset("B200")->spec), 63e9 * 256 / 280, 1e3);
  EXPECT_NEAR(host_link_bytes_per_s(find_gpu_preset("GB200")->spec), 511e9 / 2, 1e3);
}

}  // namespace
}  // namespace monarch

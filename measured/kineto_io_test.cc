#include "measured/kineto_io.h"

#include <zlib.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace monarch::measured {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir() {
  fs::path d = fs::temp_directory_path() / ("kineto_io_test_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

void write_gz(const fs::path& p, const std::string& text) {
  gzFile f = gzopen(p.string().c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  gzclose(f);
}

// The shape of a Kineto trace of one rank of a 2-GPU job (PyTorch 2.x): distributedInfo, three
// profiler steps, a compute kernel and an NCCL all-reduce kernel per step, a memcpy, launches
// with correlation ids, [memory] events.
std::string kineto_trace() {
  std::string ev;
  auto add = [&](const std::string& e) { ev += (ev.empty() ? "" : ",\n") + e; };
  for (int s = 0; s < 3; ++s) {
    const int base = 1000 * s;
    add(R"({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#)" + std::to_string(s + 4) +
        R"(", "pid": 10, "tid": 10, "ts": )" + std::to_string(base) + R"(, "dur": 1000})");
    add(R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 10, "ts": )" +
        std::to_string(base + 10) + R"(, "dur": 5, "args": {"correlation": )" + std::to_string(100 + s) + "}}");
    add(R"({"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16bf16", "pid": 0, "tid": 7, "ts": )" +
        std::to_string(base + 100) + R"(, "dur": 600, "args": {"device": 0, "stream": 7, "correlation": )" +
        std::to_string(100 + s) + "}}");
    add(R"({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "pid": 0, "tid": 20, "ts": )" +
        std::to_string(base + 500) + R"(, "dur": 400, "args": {"device": 0, "stream": 20, "Collective name": "allreduce",
        "In msg nelems": 1048576, "Out msg nelems": 1048576, "Group size": 2, "dtype": "BFloat16",
        "Process Group Name": "0", "Process Group Description": "default_pg", "Process Group Ranks": "[0, 1]"}})");
    add(R"({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD [Pinned -> Device]", "pid": 0, "tid": 7, "ts": )" +
        std::to_string(base + 50) + R"(, "dur": 20, "args": {"device": 0, "stream": 7}})");
    add(R"({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 10, "tid": 10, "ts": )" +
        std::to_string(base + 20) + R"(, "s": "t", "args": {"Device Type": 1, "Device Id": 0, "Bytes": 512,
        "Total Allocated": )" + std::to_string((s + 1) * 1073741824LL) + R"(, "Total Reserved": 4294967296}})");
  }
  return R"({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}],
  "distributedInfo": {"backend": "nccl", "rank": 1, "world_size": 2, "pg_count": 1,
    "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "ranks": [0, 1]}]},
  "traceEvents": [)" + ev + "],\n\"traceName\": \"rank1.json\"}";
}

TEST(KinetoTrace, ObjectFormGzipped) {
  const fs::path p = temp_dir() / "rank1_trace.json.gz";
  write_gz(p, kineto_trace());
  int64_t last_done = 0;
  TraceReadOptions opt;
  opt.progress = [&](int64_t done, int64_t) { last_done = done; };
  auto t = read_kineto_trace(p.string(), opt);
  ASSERT_TRUE(t) << t.problems()[0].to_string();
  EXPECT_TRUE(t->kineto_object);
  EXPECT_TRUE(t->has_device);
  EXPECT_EQ(t->rank, 1);
  EXPECT_EQ(t->world_size, 2);
  EXPECT_EQ(t->steps.size(), 3u);
  EXPECT_EQ(last_done, static_cast<int64_t>(fs::file_size(p)));
  const RankStats s = analyze_trace(*t);
  ASSERT_EQ(s.iterations.size(), 2u);
  const IterationStats& it = s.iterations[0];
  EXPECT_EQ(it.step, 4);
  EXPECT_DOUBLE_EQ(it.iteration_s, 1e-3);
  EXPECT_NEAR(it.compute_s, 600e-6, 1e-12);
  EXPECT_NEAR(it.comm_s, 400e-6, 1e-12);
  EXPECT_NEAR(it.exposed_comm_s, 200e-6, 1e-12);  // 500-700 hidden behind the gemm, 700-900 exposed
  EXPECT_NEAR(it.overlap_ratio, 0.5, 1e-12);
  EXPECT_NEAR(it.memory_s, 20e-6, 1e-12);
  EXPECT_NEAR(it.idle_s, (1000 - 20 - 800) * 1e-6, 1e-12);
  ASSERT_EQ(it.comm.size(), 1u);
  EXPECT_EQ(it.comm[0].kind, CollectiveKind::kAllReduce);
  EXPECT_EQ(it.comm[0].group, "[0,1]");
  EXPECT_EQ(it.comm[0].group_size, 2);
  EXPECT_EQ(it.comm[0].buffer_bytes, 2 * 1048576);
  EXPECT_DOUBLE_EQ(it.peak_allocated_bytes, 1073741824.0);
  fs::remove_all(p.parent_path());
}

// PyTorch 1.13's CPU export: a bare array, "pid": "CPU functions", gloo collectives.
TEST(KinetoTrace, BareArrayFormRankFromFileName) {
  const std::string text = R"([{"name": "ProfilerStep#0", "ph": "X", "ts": 0, "dur": 100, "tid": 1, "pid": "CPU functions", "args": {}},
 {"name": "aten::mm", "ph": "X", "ts": 5, "dur": 50, "tid": 1, "pid": "CPU functions", "args": {}},
 {"name": "aten::t", "ph": "X", "ts": 10, "dur": 5, "tid": 1, "pid": "CPU functions", "args": {}},
 {"name": "c10d::allreduce_", "ph": "X", "ts": 56, "dur": 2, "tid": 1, "pid": "CPU functions", "args": {}},
 {"name": "gloo:all_reduce", "ph": "X", "ts": 40, "dur": 40, "tid": 3, "pid": "CPU functions", "args": {"Input Dims": [[4680]], "Input type": ["float"]}},
 {"name": "ProfilerStep#1", "ph": "X", "ts": 100, "dur": 100, "tid": 1, "pid": "CPU functions", "args": {}}])";
  const fs::path p = temp_dir() / "rank-3.json";
  write_text(p, text);
  auto t = read_kineto_trace(p.string());
  ASSERT_TRUE(t) << t.problems()[0].to_string();
  EXPECT_FALSE(t->kineto_object);
  EXPECT_FALSE(t->has_device);
  EXPECT_EQ(t->rank, 3);
  const RankStats s = analyze_trace(*t);
  ASSERT_EQ(s.iterations.size(), 1u);
  EXPECT_NEAR(s.iterations[0].compute_s, 50e-6, 1e-12);
  EXPECT_NEAR(s.iterations[0].comm_s, 40e-6, 1e-12);
  EXPECT_NEAR(s.iterations[0].exposed_comm_s, 25e-6, 1e-12);
  ASSERT_EQ(s.iterations[0].comm.size(), 1u);
  EXPECT_EQ(s.iterations[0].comm[0].buffer_bytes, 4680 * 4);
  TraceReadOptions opt;
  opt.rank = 0;
  EXPECT_EQ(read_kineto_trace(p.string(), opt)->rank, 0);
  fs::remove_all(p.parent_path());
}

TEST(KinetoTrace, TruncatedFilesAreProblemsNamingTheFile) {
  const fs::path dir = temp_dir();
  const std::string text = kineto_trace();
  const fs::path plain = dir / "rank0.json";
  write_text(plain, text.substr(0, text.size() / 2));
  auto a = read_kineto_trace(plain.string());
  ASSERT_FALSE(a);
  EXPECT_EQ(a.problems()[0].where, plain.string());
  EXPECT_NE(a.problems()[0].message.find("truncated"), std::string::npos) << a.problems()[0].message;

  // A gzip stream cut in the middle.
  const fs::path full = dir / "full.json.gz";
  write_gz(full, text);
  std::ifstream in(full, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const fs::path cut = dir / "rank0_trace.json.gz";
  write_text(cut, bytes.substr(0, bytes.size() / 2));
  auto b = read_kineto_trace(cut.string());
  ASSERT_FALSE(b);
  EXPECT_EQ(b.problems()[0].where, cut.string());

  const fs::path other = dir / "other.json";
  write_text(other, R"({"format": "monarch-plan/2"})");
  auto c = read_kineto_trace(other.string());
  ASSERT_FALSE(c);
  EXPECT_NE(c.problems()[0].message.find("not a Chrome trace"), std::string::npos);
  EXPECT_FALSE(read_kineto_trace((dir / "missing.json").string()));
  fs::remove_all(dir);
}

TEST(KinetoTrace, RankFromFileNames) {
  EXPECT_EQ(rank_from_file_name("profiling/traces/iteration_10/rank7_trace.json.gz"), 7);
  EXPECT_EQ(rank_from_file_name("torch_profile/rank-12.json.gz"), 12);
  EXPECT_EQ(rank_from_file_name("host_123.worker_2.pt.trace.json"), 2);
  EXPECT_FALSE(rank_from_file_name("trace.json"));
}

TEST(KinetoTrace, DtypeBytes) {
  EXPECT_EQ(dtype_bytes("BFloat16"), 2);
  EXPECT_EQ(dtype_bytes("c10::BFloat16"), 2);
  EXPECT_EQ(dtype_bytes("Float"), 4);
  EXPECT_EQ(dtype_bytes("Long"), 8);
  EXPECT_EQ(dtype_bytes("Float8_e4m3fn"), 1);
  EXPECT_EQ(dtype_bytes("Mystery"), 0);
}

}  // namespace
}  // namespace monarch::measured

namespace monarch::measured {
namespace {

const std::string kData = std::string(MONARCH_SOURCE_DIR) + "/tests/data/kineto/";

// A real GPU trace (HTA's test data, tests/data/README.md): rank 0 of 2-GPU DDP.
TEST(KinetoTrace, RealGpuTraceFromHta) {
  auto t = read_kineto_trace(kData + "hta_nccl_data_rank0.json.gz");
  ASSERT_TRUE(t) << t.problems()[0].to_string();
  EXPECT_TRUE(t->kineto_object);
  EXPECT_TRUE(t->has_device);
  EXPECT_EQ(t->rank, 0);
  EXPECT_EQ(t->world_size, 2);
  ASSERT_EQ(t->steps.size(), 3u);  // ProfilerStep#4, #5, #6
  const RankStats s = analyze_trace(*t);
  ASSERT_EQ(s.iterations.size(), 2u);
  EXPECT_EQ(s.iterations[0].step, 4);
  EXPECT_NEAR(s.iterations[0].iteration_s, 222442.191e-6, 1e-9);
  EXPECT_NEAR(s.iterations[1].iteration_s, 219726.905e-6, 1e-9);
  for (const IterationStats& it : s.iterations) {
    EXPECT_GT(it.compute_s, 0);
    EXPECT_GT(it.comm_s, 0);
    EXPECT_GE(it.overlap_ratio, 0);
    EXPECT_LE(it.overlap_ratio, 1);
    EXPECT_LE(it.exposed_comm_s, it.comm_s + 1e-12);
    EXPECT_LE(it.compute_s + it.exposed_comm_s, it.iteration_s * 1.5);
    bool all_reduce = false;
    for (const CommStat& c : it.comm) {
      if (c.kind != CollectiveKind::kAllReduce) continue;
      all_reduce = true;
      EXPECT_EQ(c.group, "[0,1]");
      EXPECT_EQ(c.group_size, 2);
      EXPECT_GT(c.buffer_bytes, 0);
      EXPECT_EQ(c.buffer_bytes % 4, 0);  // float gradients
    }
    EXPECT_TRUE(all_reduce);
  }
}

TEST(KinetoTrace, RealSampledTraceOfA128RankJob) {
  auto t = read_kineto_trace(kData + "hta_sampled_rank-0.json.gz");
  ASSERT_TRUE(t) << t.problems()[0].to_string();
  EXPECT_EQ(t->world_size, 128);
  const RankStats s = analyze_trace(*t);
  ASSERT_EQ(s.iterations.size(), 1u);
  bool p2p = false;
  for (const CommStat& c : s.iterations[0].comm) p2p |= c.kind == CollectiveKind::kSendRecv;
  EXPECT_TRUE(p2p);
}

}  // namespace
}  // namespace monarch::measured

// Bootstrap of the GPU runtime without MPI: --init-method parsing, rank from the launcher's
// environment, and rank 0's id reaching every rank over tcp:// and file:// (threads as ranks).
#include "realrt/gpu/dist_init.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <map>
#include <thread>
#include <vector>

namespace monarch::realrt {
namespace {

TEST(InitMethod, ParsesMpiTcpAndFile) {
  auto m = parse_init_method("mpi");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->kind, InitMethod::Kind::kMpi);
  auto t = parse_init_method("tcp://node-001:29500");
  ASSERT_TRUE(t.ok()) << t.problems()[0].to_string();
  EXPECT_EQ(t->kind, InitMethod::Kind::kTcp);
  EXPECT_EQ(t->host, "node-001");
  EXPECT_EQ(t->port, 29500);
  auto v6 = parse_init_method("tcp://[::1]:1234");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 1234);
  auto f = parse_init_method("file:///shared/job-7/init");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->kind, InitMethod::Kind::kFile);
  EXPECT_EQ(f->path, "/shared/job-7/init");
}

TEST(InitMethod, RefusesMalformedTextNamingTheOption) {
  for (const char* bad : {"", "env://", "tcp://host", "tcp://:80", "tcp://h:0", "tcp://h:65536", "tcp://h:8x",
                          "tcp://[::1]80", "file://"}) {
    auto m = parse_init_method(bad);
    ASSERT_FALSE(m.ok()) << bad;
    EXPECT_EQ(m.problems()[0].where, "--init-method") << bad;
  }
}

GetEnv env_of(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

TEST(RankEnv, ReadsTorchrunThenOpenMpiThenSlurm) {
  auto none = rank_from_env(env_of({}));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  auto slurm = rank_from_env(env_of({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"}}));
  ASSERT_TRUE(slurm.ok());
  EXPECT_EQ((*slurm)->rank, 5);
  EXPECT_EQ((*slurm)->world_size, 8);
  EXPECT_EQ((*slurm)->local_rank, 1);

  // mpirun inside a Slurm allocation: OpenMPI's variables win over Slurm's.
  auto ompi = rank_from_env(env_of({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                                    {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}));
  ASSERT_TRUE(ompi.ok());
  EXPECT_EQ((*ompi)->rank, 2);
  EXPECT_EQ((*ompi)->world_size, 4);
  EXPECT_EQ((*ompi)->local_rank, 2);  // no local rank variable: the rank
  EXPECT_EQ((*ompi)->source, "OMPI_COMM_WORLD_RANK/SIZE");

  auto torch = rank_from_env(env_of({{"RANK", "3"}, {"WORLD_SIZE", "16"}, {"LOCAL_RANK", "3"},
                                     {"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}}));
  ASSERT_TRUE(torch.ok());
  EXPECT_EQ((*torch)->rank, 3);
  EXPECT_EQ((*torch)->world_size, 16);
}

TEST(RankEnv, RefusesMalformedOrInconsistentVariables) {
  auto half = rank_from_env(env_of({{"RANK", "0"}}));
  ASSERT_FALSE(half.ok());
  EXPECT_EQ(half.problems()[0].where, "WORLD_SIZE");
  auto text = rank_from_env(env_of({{"SLURM_PROCID", "x"}, {"SLURM_NTASKS", "2"}}));
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.problems()[0].where, "SLURM_PROCID");
  auto beyond = rank_from_env(env_of({{"RANK", "4"}, {"WORLD_SIZE", "4"}}));
  ASSERT_FALSE(beyond.ok());
  EXPECT_EQ(beyond.problems()[0].where, "RANK");
  auto zero = rank_from_env(env_of({{"RANK", "0"}, {"WORLD_SIZE", "0"}}));
  ASSERT_FALSE(zero.ok());
}

// A port nobody listens on now (bound then released).
int free_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  const int port = ntohs(a.sin_port);
  ::close(s);
  return port;
}

// Runs `world` ranks as threads; returns what each got.
std::vector<Expected<std::string>> share_in_threads(const InitMethod& m, int world, const std::string& blob) {
  std::vector<Expected<std::string>> got(world, Expected<std::string>(std::string()));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] { got[r] = share_from_rank0(m, r, world, r == 0 ? blob : std::string(), 20); });
  for (auto& t : threads) t.join();
  return got;
}

std::string unique_id_like() {  // 128 bytes with zeros in them, as an ncclUniqueId
  std::string s(128, '\0');
  for (size_t i = 0; i < s.size(); i += 3) s[i] = static_cast<char>(i * 7 + 1);
  return s;
}

TEST(ShareFromRank0, TcpReachesEveryRank) {
  auto m = parse_init_method("tcp://127.0.0.1:" + std::to_string(free_port()));
  ASSERT_TRUE(m.ok());
  const std::string id = unique_id_like();
  for (auto& g : share_in_threads(*m, 4, id)) {
    ASSERT_TRUE(g.ok()) << g.problems()[0].to_string();
    EXPECT_EQ(*g, id);
  }
}

TEST(ShareFromRank0, FileReachesEveryRankAndIsRemovedAfterwards) {
  const auto dir = std::filesystem::temp_directory_path() / ("monarch-init-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "init").string();
  auto m = parse_init_method("file://" + path);
  ASSERT_TRUE(m.ok());
  const std::string id = unique_id_like();
  for (auto& g : share_in_threads(*m, 3, id)) {
    ASSERT_TRUE(g.ok()) << g.problems()[0].to_string();
    EXPECT_EQ(*g, id);
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir));  // the file and the acknowledgements are gone
  std::filesystem::remove_all(dir);
}

TEST(ShareFromRank0, FileRefusesAStaleFile) {
  const auto path = std::filesystem::temp_directory_path() / ("monarch-stale-" + std::to_string(getpid()));
  std::ofstream(path) << "old";
  auto m = parse_init_method("file://" + path.string());
  auto got = share_from_rank0(*m, 0, 2, "id", 1);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.problems()[0].message.find("exists already"), std::string::npos);
  std::filesystem::remove(path);
}

TEST(ShareFromRank0, TcpGivesUpWhenRank0NeverListens) {
  auto m = parse_init_method("tcp://127.0.0.1:" + std::to_string(free_port()));
  auto got = share_from_rank0(*m, 1, 2, "", 0.3);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.problems()[0].message.find("could not reach rank 0"), std::string::npos);
}

}  // namespace
}  // namespace monarch::realrt

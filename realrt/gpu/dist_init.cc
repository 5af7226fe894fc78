#include "realrt/gpu/dist_init.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

namespace monarch::realrt {

namespace {

using Clock = std::chrono::steady_clock;
// Pause between two attempts to connect / to look for the file: short against a launch (seconds),
// long enough not to spin.
constexpr auto kRetryPause = std::chrono::milliseconds(50);

bool parse_int(const std::string& s, int64_t* out) {
  if (s.empty() || s.size() > 18) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Closes a socket when it goes out of scope.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

bool write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool read_all(int fd, void* data, size_t n, Clock::time_point deadline) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const auto left_ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left_ms <= 0) return false;
    pollfd pfd{fd, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, static_cast<int>(left_ms));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// The blob travels as an 8-byte little-endian length, then the bytes.
constexpr size_t kMaxBlobBytes = 1 << 20;  // a unique id is 128 bytes; anything near 1 MiB is garbage

Expected<std::string> tcp_share(const InitMethod& m, int64_t rank, int64_t world, const std::string& blob,
                                double timeout_s) {
  using E = Expected<std::string>;
  const std::string where = "--init-method tcp://" + m.host + ":" + std::to_string(m.port);
  const auto t0 = Clock::now();
  const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (rank == 0) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(m.port);
  // Rank 0 listens on every interface (the others may reach it under any of its names).
  const int gai = ::getaddrinfo(rank == 0 ? nullptr : m.host.c_str(), port.c_str(), &hints, &res);
  if (gai != 0) return E::fail(where, std::string("cannot resolve the address: ") + gai_strerror(gai));
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> res_guard(res, ::freeaddrinfo);

  if (rank == 0) {
    // Prefer an IPv6 socket (dual-stack also accepts IPv4), else the first address.
    addrinfo* a = res;
    for (addrinfo* it = res; it; it = it->ai_next)
      if (it->ai_family == AF_INET6) a = it;
    Fd listener(::socket(a->ai_family, a->ai_socktype, a->ai_protocol));
    if (listener.fd < 0) return E::fail(where, std::string("socket: ") + std::strerror(errno));
    const int one = 1, zero = 0;
    ::setsockopt(listener.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (a->ai_family == AF_INET6) ::setsockopt(listener.fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    if (::bind(listener.fd, a->ai_addr, a->ai_addrlen) != 0)
      return E::fail(where, "rank 0 cannot listen on port " + port + ": " + std::strerror(errno));
    if (::listen(listener.fd, static_cast<int>(std::min<int64_t>(world, 1024))) != 0)
      return E::fail(where, std::string("listen: ") + std::strerror(errno));
    const uint64_t n = blob.size();
    for (int64_t served = 1; served < world;) {
      const auto left_ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      pollfd pfd{listener.fd, POLLIN, 0};
      const int ready = left_ms > 0 ? ::poll(&pfd, 1, static_cast<int>(left_ms)) : 0;
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0)
        return E::fail(where, "rank 0 heard from " + std::to_string(served - 1) + " of " + std::to_string(world - 1) +
                                  " ranks within " + std::to_string(timeout_s) + " s");
      Fd conn(::accept(listener.fd, nullptr, nullptr));
      if (conn.fd < 0) continue;
      if (write_all(conn.fd, &n, sizeof n) && write_all(conn.fd, blob.data(), blob.size())) ++served;
    }
    return blob;
  }

  std::string last_error = "no address";
  while (Clock::now() < deadline) {
    for (addrinfo* a = res; a; a = a->ai_next) {
      Fd s(::socket(a->ai_family, a->ai_socktype, a->ai_protocol));
      if (s.fd < 0) continue;
      if (::connect(s.fd, a->ai_addr, a->ai_addrlen) != 0) {
        last_error = std::strerror(errno);
        continue;
      }
      uint64_t n = 0;
      if (!read_all(s.fd, &n, sizeof n, deadline) || n > kMaxBlobBytes)
        return E::fail(where, "rank " + std::to_string(rank) + " got no valid reply from rank 0");
      std::string out(n, '\0');
      if (!read_all(s.fd, out.data(), n, deadline))
        return E::fail(where, "rank " + std::to_string(rank) + " got a truncated reply from rank 0");
      return out;
    }
    std::this_thread::sleep_for(kRetryPause);
  }
  return E::fail(where, "rank " + std::to_string(rank) + " could not reach rank 0 within " + std::to_string(timeout_s) +
                            " s (" + last_error + ")");
}

Expected<std::string> file_share(const InitMethod& m, int64_t rank, int64_t world, const std::string& blob,
                                 double timeout_s) {
  using E = Expected<std::string>;
  namespace fs = std::filesystem;
  const std::string where = "--init-method file://" + m.path;
  const auto t0 = Clock::now();
  auto ack = [&](int64_t r) { return m.path + ".ack." + std::to_string(r); };
  std::error_code ec;
  if (rank == 0) {
    if (fs::exists(m.path, ec))
      return E::fail(where, "the file exists already (left by an earlier run?); remove it and start again");
    const std::string tmp = m.path + ".tmp";
    {
      std::ofstream f(tmp, std::ios::binary);
      f.write(blob.data(), static_cast<std::streamsize>(blob.size()));
      if (!f) return E::fail(where, "rank 0 cannot write " + tmp);
    }
    fs::rename(tmp, m.path, ec);  // atomic: readers see the whole file or none
    if (ec) return E::fail(where, "rank 0 cannot create the file: " + ec.message());
    for (int64_t r = 1; r < world; ++r) {
      while (!fs::exists(ack(r), ec)) {
        if (seconds_since(t0) > timeout_s) {
          fs::remove(m.path, ec);
          return E::fail(where, "rank " + std::to_string(r) + " did not read the file within " +
                                    std::to_string(timeout_s) + " s");
        }
        std::this_thread::sleep_for(kRetryPause);
      }
    }
    for (int64_t r = 1; r < world; ++r) fs::remove(ack(r), ec);
    fs::remove(m.path, ec);
    return blob;
  }
  while (!fs::exists(m.path, ec)) {
    if (seconds_since(t0) > timeout_s)
      return E::fail(where, "rank " + std::to_string(rank) + " found no file from rank 0 within " +
                                std::to_string(timeout_s) + " s");
    std::this_thread::sleep_for(kRetryPause);
  }
  std::ifstream f(m.path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  if (!f) return E::fail(where, "rank " + std::to_string(rank) + " cannot read the file");
  std::ofstream(ack(rank)) << "read\n";
  return ss.str();
}

}  // namespace

Expected<InitMethod> parse_init_method(const std::string& text, const std::string& where) {
  using E = Expected<InitMethod>;
  InitMethod m;
  if (text == "mpi") return m;
  if (text.rfind("file://", 0) == 0) {
    m.kind = InitMethod::Kind::kFile;
    m.path = text.substr(7);
    if (m.path.empty()) return E::fail(where, "found \"" + text + "\", expected file://PATH with a path");
    return m;
  }
  if (text.rfind("tcp://", 0) == 0) {
    m.kind = InitMethod::Kind::kTcp;
    const std::string rest = text.substr(6);
    size_t colon;
    if (!rest.empty() && rest[0] == '[') {  // [IPv6]:PORT
      const size_t close = rest.find(']');
      if (close == std::string::npos || close + 1 >= rest.size() || rest[close + 1] != ':')
        return E::fail(where, "found \"" + text + "\", expected tcp://[ADDRESS]:PORT");
      m.host = rest.substr(1, close - 1);
      colon = close + 1;
    } else {
      colon = rest.rfind(':');
      if (colon == std::string::npos) return E::fail(where, "found \"" + text + "\", expected tcp://HOST:PORT");
      m.host = rest.substr(0, colon);
    }
    int64_t port = 0;
    if (m.host.empty()) return E::fail(where, "found \"" + text + "\", expected a host before the port");
    if (!parse_int(rest.substr(colon + 1), &port) || port < 1 || port > 65535)
      return E::fail(where, "found \"" + text + "\", expected a port from 1 to 65535 after the host");
    m.port = static_cast<int>(port);
    return m;
  }
  return E::fail(where, "found \"" + text + "\", expected mpi, tcp://HOST:PORT or file://PATH");
}

Expected<std::optional<RankEnv>> rank_from_env(const GetEnv& getenv) {
  using E = Expected<std::optional<RankEnv>>;
  struct Source {
    const char *rank, *size, *local, *label;
  };
  const Source sources[] = {
      {"RANK", "WORLD_SIZE", "LOCAL_RANK", "RANK/WORLD_SIZE"},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_RANK/SIZE"},
      {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_PROCID/NTASKS"},
  };
  for (const Source& s : sources) {
    const char* r = getenv(s.rank);
    const char* n = getenv(s.size);
    if (!r && !n) continue;
    if (!r || !n)
      return E::fail(r ? s.size : s.rank, std::string("is not set although ") + (r ? s.rank : s.size) + " is");
    RankEnv env;
    env.source = s.label;
    if (!parse_int(r, &env.rank)) return E::fail(s.rank, std::string("found \"") + r + "\", expected an integer >= 0");
    if (!parse_int(n, &env.world_size) || env.world_size < 1)
      return E::fail(s.size, std::string("found \"") + n + "\", expected an integer >= 1");
    if (env.rank >= env.world_size)
      return E::fail(s.rank, "found " + std::to_string(env.rank) + ", expected less than " + s.size + " (" +
                                 std::to_string(env.world_size) + ")");
    env.local_rank = env.rank;
    if (const char* l = getenv(s.local); l && !parse_int(l, &env.local_rank))
      return E::fail(s.local, std::string("found \"") + l + "\", expected an integer >= 0");
    return std::optional<RankEnv>(env);
  }
  return std::optional<RankEnv>();
}

Expected<std::string> share_from_rank0(const InitMethod& method, int64_t rank, int64_t world_size,
                                       const std::string& blob, double timeout_s) {
  switch (method.kind) {
    case InitMethod::Kind::kTcp: return tcp_share(method, rank, world_size, blob, timeout_s);
    case InitMethod::Kind::kFile: return file_share(method, rank, world_size, blob, timeout_s);
    case InitMethod::Kind::kMpi: break;
  }
  return Expected<std::string>::fail("--init-method", "mpi is shared over MPI, not by share_from_rank0");
}

}  // namespace monarch::realrt
